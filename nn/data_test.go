package nn

import (
	"sync"
	"testing"
)

func TestArchLayout(t *testing.T) {
	cases := []struct {
		name    string
		in      int
		hidden  []int
		out     int
		nParams int
	}{
		// The bandit network: 117 one-hot inputs, 100-100 ReLU, 2 arms.
		{"bandit network", 117, []int{100, 100}, 2, 117*100 + 100 + 100*100 + 100 + 100*2 + 2},
		{"linear model", 4, nil, 3, 4*3 + 3},
		{"one hidden layer", 2, []int{5}, 1, 2*5 + 5 + 5 + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewArch(c.in, c.hidden, c.out)
			if a.NumParams() != c.nParams {
				t.Errorf("NumParams() = %d, want %d", a.NumParams(), c.nParams)
			}
			if a.NumLayers() != len(c.hidden)+1 || a.In() != c.in || a.Out() != c.out {
				t.Errorf("NumLayers, In, Out = %d, %d, %d; want %d, %d, %d", a.NumLayers(), a.In(), a.Out(), len(c.hidden)+1, c.in, c.out)
			}
			off := 0
			for l := range a.NumLayers() {
				ly := a.Layer(l)
				if ly.W != off || ly.B != off+ly.In*ly.Out || ly.End() != off+ly.Size() {
					t.Errorf("layer %d = %+v is not contiguous from offset %d", l, ly, off)
				}
				if l > 0 && ly.In != a.Layer(l-1).Out {
					t.Errorf("layer %d input width %d, previous output width %d", l, ly.In, a.Layer(l-1).Out)
				}
				off = ly.End()
			}
			if off != a.NumParams() {
				t.Errorf("layers end at %d, NumParams() = %d", off, a.NumParams())
			}
		})
	}
}

func TestDataViewsArePrefixesUnaffectedByAppends(t *testing.T) {
	d := NewData(2, 3)
	d.Append([]float64{1, 2}, 0, 10)
	v1 := d.View()
	x := []float64{3, 4}
	d.Append(x, 2, 20)
	x[0] = 99 // Append copied x
	v2 := d.View()
	for range 100 { // force reallocations of the backing arrays
		d.Append([]float64{0, 0}, 1, 0)
	}
	if v1.Len() != 1 || v2.Len() != 2 || d.Len() != 102 {
		t.Fatalf("lengths %d, %d, %d; want 1, 2, 102", v1.Len(), v2.Len(), d.Len())
	}
	if got := v2.X(1); got[0] != 3 || got[1] != 4 || v2.Arm(1) != 2 || v2.Y(1) != 20 {
		t.Errorf("row 1 = %v, %d, %v; want [3 4], 2, 20", got, v2.Arm(1), v2.Y(1))
	}
	if p := d.View().Prefix(2); p.Len() != 2 || p.Y(1) != 20 {
		t.Errorf("Prefix(2) has %d rows ending in %v", p.Len(), p.Y(1))
	}
}

// TestDataConcurrentAppendAndRead is meant for go test -race: one goroutine
// appends while others evaluate likelihoods on views.
func TestDataConcurrentAppendAndRead(t *testing.T) {
	a := NewArch(3, []int{4}, 2)
	d := NewData(3, 2)
	for i := range 10 {
		d.Append([]float64{float64(i), 1, -1}, i%2, float64(i))
	}
	w := make([]float64, a.NumParams())
	a.InitHe(w, seeded(1))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				v := d.View()
				n := v.Len()
				ll := NewLikelihood(a, v, Options{Estimator: Deterministic}).NewEvaluator(4).LogLik(nil, nil, w, nil, nil)
				if v.Len() != n || ll > 0 {
					t.Errorf("view changed length or log-likelihood %v > 0", ll)
					return
				}
			}
		}()
	}
	for i := range 500 {
		d.Append([]float64{1, float64(i), 0}, 1, 1)
	}
	wg.Wait()
}
