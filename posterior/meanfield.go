package posterior

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/refinery-bandits/refinery/nn"
	"io"
	"math"
	"math/rand/v2"
)

// MeanField is a fully factorized Gaussian approximate posterior with a
// fully factorized Gaussian prior (Khan 2018, Section 3; Blundell et al.
// 2015):
//
//	q(w) = prod_j N(w_j | mu_j, sigma_j^2),   sigma_j = softplus(rho_j) = log(1 + exp(rho_j))
//	p(w) = prod_j N(w_j | m_j, s_j^2)
//
// The standard deviations are parameterized through the softplus so that
// unconstrained optimization keeps them positive. The prior's mean m is
// zero for an ordinary posterior; the conditional posteriors of local
// refinement (Havasi et al. 2021, Eq. 4) use a non-zero one.
//
// Mu, Rho and Hyper are views of one flat vector (Params) so that an
// optimizer can treat all variational parameters as one vector. Hyper
// holds the likelihood's point-estimated hyperparameters (for example a
// learned log noise variance); they have no prior and no KL term.
type MeanField struct {
	params []float64 // [mu | rho | hyper]

	Mu    []float64
	Rho   []float64
	Hyper []float64

	// PriorMean is the prior mean m per parameter; nil means zero.
	PriorMean []float64
	// PriorVar is the prior variance s^2 per parameter.
	PriorVar []float64
}

// NewMeanField returns a mean-field posterior over n parameters with
// nHyper likelihood hyperparameters and the zero-mean prior with the
// given per-parameter variances (len(priorVar) == n). The means start at
// zero and the standard deviations at initSigma (which must be > 0); use
// InitMeans to break the symmetry of a neural network.
func NewMeanField(n, nHyper int, priorVar []float64, initSigma float64) *MeanField {
	if len(priorVar) != n {
		panic(fmt.Sprintf("posterior: len(priorVar) = %d, want %d", len(priorVar), n))
	}
	if !(initSigma > 0) {
		panic("posterior: initSigma must be positive")
	}
	for _, v := range priorVar {
		if !(v > 0) || math.IsInf(v, 0) {
			panic("posterior: prior variances must be positive and finite")
		}
	}
	q := newMeanField(n, nHyper)
	q.PriorVar = append([]float64(nil), priorVar...)
	rho := SoftplusInv(initSigma)
	for j := range q.Rho {
		q.Rho[j] = rho
	}
	return q
}

func newMeanField(n, nHyper int) *MeanField {
	p := make([]float64, 2*n+nHyper)
	return &MeanField{
		params: p,
		Mu:     p[:n:n],
		Rho:    p[n : 2*n : 2*n],
		Hyper:  p[2*n:],
	}
}

// Len returns the number of model parameters (not counting Hyper).
func (q *MeanField) Len() int { return len(q.Mu) }

// Params returns the flat vector [mu | rho | hyper] that Mu, Rho and
// Hyper are views of. Writing to it changes q.
func (q *MeanField) Params() []float64 { return q.params }

// Sigma writes the standard deviations softplus(rho) into dst and
// returns it; it allocates when dst is nil.
func (q *MeanField) Sigma(dst []float64) []float64 {
	if dst == nil {
		dst = make([]float64, len(q.Rho))
	}
	if len(dst) != len(q.Rho) {
		panic("posterior: Sigma dst length mismatch")
	}
	for j, r := range q.Rho {
		dst[j] = Softplus(r)
	}
	return dst
}

// SetSigma sets rho so that softplus(rho_j) = sigma[j].
func (q *MeanField) SetSigma(sigma []float64) {
	if len(sigma) != len(q.Rho) {
		panic("posterior: SetSigma length mismatch")
	}
	for j, s := range sigma {
		q.Rho[j] = SoftplusInv(s)
	}
}

// Sample writes one draw w = mu + sigma * eps, eps ~ N(0, I), into dst
// and returns it; it allocates when dst is nil.
func (q *MeanField) Sample(dst []float64, rng *rand.Rand) []float64 {
	if dst == nil {
		dst = make([]float64, len(q.Mu))
	}
	if len(dst) != len(q.Mu) {
		panic("posterior: Sample dst length mismatch")
	}
	for j, m := range q.Mu {
		dst[j] = m + Softplus(q.Rho[j])*rng.NormFloat64()
	}
	return dst
}

// priorMean returns m_j.
func (q *MeanField) priorMean(j int) float64 {
	if q.PriorMean == nil {
		return 0
	}
	return q.PriorMean[j]
}

// KL returns KL[q || p] in closed form (Khan 2018, Section 3; the KL
// between two univariate Gaussians, summed over parameters):
//
//	KL = sum_j [ log(s_j / sigma_j) + (sigma_j^2 + (mu_j - m_j)^2) / (2 s_j^2) - 1/2 ]
func (q *MeanField) KL() float64 {
	var kl float64
	for j, mu := range q.Mu {
		s2 := q.PriorVar[j]
		sig := Softplus(q.Rho[j])
		d := mu - q.priorMean(j)
		kl += 0.5*math.Log(s2) - math.Log(sig) + (sig*sig+d*d)/(2*s2) - 0.5
	}
	return kl
}

// Clone returns a deep copy of q.
func (q *MeanField) Clone() *MeanField {
	c := newMeanField(len(q.Mu), len(q.Hyper))
	c.CopyFrom(q)
	return c
}

// CopyFrom makes q a copy of src without allocating when q already has
// prior slices of the right size. The sizes must match.
func (q *MeanField) CopyFrom(src *MeanField) {
	if len(q.params) != len(src.params) || len(q.Hyper) != len(src.Hyper) {
		panic("posterior: CopyFrom size mismatch")
	}
	copy(q.params, src.params)
	q.PriorVar = copyInto(q.PriorVar, src.PriorVar)
	if src.PriorMean == nil {
		q.PriorMean = nil
	} else {
		q.PriorMean = copyInto(q.PriorMean, src.PriorMean)
	}
}

func copyInto(dst, src []float64) []float64 {
	if cap(dst) < len(src) {
		dst = make([]float64, len(src))
	}
	dst = dst[:len(src)]
	copy(dst, src)
	return dst
}

// Binary encoding of a MeanField snapshot: a magic, the sizes, then the
// float64 vectors little-endian.
var meanFieldMagic = [8]byte{'R', 'F', 'Y', 'M', 'F', 0, 0, 1}

// MarshalBinary encodes q (parameters and prior) for a snapshot.
func (q *MeanField) MarshalBinary() ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(meanFieldMagic[:])
	hasMean := uint64(0)
	if q.PriorMean != nil {
		hasMean = 1
	}
	for _, v := range []uint64{uint64(len(q.Mu)), uint64(len(q.Hyper)), hasMean} {
		_ = binary.Write(&buf, binary.LittleEndian, v)
	}
	_ = binary.Write(&buf, binary.LittleEndian, q.params)
	_ = binary.Write(&buf, binary.LittleEndian, q.PriorVar)
	if q.PriorMean != nil {
		_ = binary.Write(&buf, binary.LittleEndian, q.PriorMean)
	}
	return buf.Bytes(), nil
}

// ErrBadSnapshot is returned when a snapshot cannot be decoded.
var ErrBadSnapshot = errors.New("posterior: bad snapshot encoding")

// UnmarshalBinary decodes a snapshot written by MarshalBinary into q,
// replacing its contents.
func (q *MeanField) UnmarshalBinary(data []byte) error {
	r := bytes.NewReader(data)
	var magic [8]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || magic != meanFieldMagic {
		return fmt.Errorf("%w: bad magic", ErrBadSnapshot)
	}
	var hdr [3]uint64
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	n, nh, hasMean := hdr[0], hdr[1], hdr[2]
	want := (2*n + nh + n + hasMean*n) * 8
	if n > 1<<28 || nh > 1<<10 || hasMean > 1 || uint64(r.Len()) != want {
		return fmt.Errorf("%w: sizes n=%d hyper=%d do not match %d bytes", ErrBadSnapshot, n, nh, r.Len())
	}
	c := newMeanField(int(n), int(nh))
	c.PriorVar = make([]float64, n)
	if err := binary.Read(r, binary.LittleEndian, c.params); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if err := binary.Read(r, binary.LittleEndian, c.PriorVar); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if hasMean == 1 {
		c.PriorMean = make([]float64, n)
		if err := binary.Read(r, binary.LittleEndian, c.PriorMean); err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
	}
	*q = *c
	return nil
}

// Softplus returns log(1 + exp(x)), computed without overflow
// (nn.Softplus).
func Softplus(x float64) float64 { return nn.Softplus(x) }

// SoftplusInv returns rho with Softplus(rho) = s for s > 0:
// rho = log(exp(s) - 1), computed without overflow or cancellation.
func SoftplusInv(s float64) float64 {
	if s > 30 {
		return s + math.Log1p(-math.Exp(-s))
	}
	return math.Log(math.Expm1(s))
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}
