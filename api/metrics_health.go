package api

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/refinery-bandits/refinery/bandit"
)

// healthCollector reports, at scrape time, the health of every watched
// bandit's published posterior (bandit.Agent.Health, issue 28). A figure
// a bandit does not have (no network, no held-out rewards yet, Bernoulli
// noise) has no series.
type healthCollector struct {
	svc atomic.Pointer[bandit.Service]

	sigmaMedian, atPrior, noise, rewardVar, logLik, ece, alarm, topShare *prometheus.Desc
}

func newHealthCollector() *healthCollector {
	return &healthCollector{
		sigmaMedian: prometheus.NewDesc("refinery_posterior_sigma_median",
			"Median posterior standard deviation of a layer's weights and biases (layer 1 the first hidden, the highest the output layer), network units: the mean-field posterior of mf-ts and refined-ts, the Laplace variances of laplace-ts diagonal. Not reported for a layer fitted as a point estimate (model.stochastic \"output\": the hidden layers).",
			[]string{"bandit", "layer"}, nil),
		atPrior: prometheus.NewDesc("refinery_posterior_sigma_at_prior_ratio",
			"Share of a layer's parameters whose posterior standard deviation is at least 0.9 of the prior's (model.prior, model.prior_variance): the share the data has not narrowed. Not reported for a layer fitted as a point estimate.",
			[]string{"bandit", "layer"}, nil),
		noise: prometheus.NewDesc("refinery_noise_variance",
			"Learned Gaussian noise variance, squared reward units: arm=\"shared\" for one noise of every arm, else per arm (model.noise per-arm; context: the arm's mean over the contexts of its rewards). None under the Bernoulli likelihood.",
			[]string{"bandit", "arm"}, nil),
		rewardVar: prometheus.NewDesc("refinery_reward_variance",
			"Sample variance of the rewards the published posterior was trained on (of the arm's, beside a per-arm noise), squared reward units; beside refinery_noise_variance.",
			[]string{"bandit", "arm"}, nil),
		logLik: prometheus.NewDesc("refinery_heldout_loglik_per_reward",
			"Mean log predictive density of rewards scored before the posterior was trained on them, nats per reward: window=\"version\" the rewards the published version was trained on, scored by the previous version; window=\"recent\" the newest 512 scored so far, each by the version published when it arrived.",
			[]string{"bandit", "window"}, nil),
		ece: prometheus.NewDesc("refinery_calibration_error",
			"Expected calibration error (10 equal-width bins of the predicted p(y = 1) of the played arm) of 0/1 rewards scored before the posterior was trained on them; windows as refinery_heldout_loglik_per_reward.",
			[]string{"bandit", "window"}, nil),
		alarm: prometheus.NewDesc("refinery_lockin_alarm",
			"1 when one arm took at least 99% of the newest decisions (at most 500, at least 100) while the published posterior gives another arm a probability of being best above 0.05, averaged over those decisions' contexts; else 0.",
			[]string{"bandit"}, nil),
		topShare: prometheus.NewDesc("refinery_lockin_top_arm_share",
			"Share of the newest decisions (at most 500) taken by the arm that took the most of them; 0 before any decision.",
			[]string{"bandit"}, nil),
	}
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sigmaMedian, c.atPrior, c.noise, c.rewardVar, c.logLik, c.ece, c.alarm, c.topShare} {
		ch <- d
	}
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	svc := c.svc.Load()
	if svc == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, a := range svc.Agents() {
		name := a.Name()
		h := a.Health()
		for _, l := range h.Layers {
			if l.PointEstimate {
				continue // its held sigmas say nothing of the data
			}
			layer := strconv.Itoa(l.Layer)
			gauge(c.sigmaMedian, l.MedianSigma, name, layer)
			gauge(c.atPrior, l.AtPriorShare, name, layer)
		}
		if h.Noise != nil {
			for _, v := range h.Noise.Variances {
				arm := v.Arm
				if arm == "" {
					arm = "shared"
				}
				gauge(c.noise, v.NoiseVariance, name, arm)
				if v.RewardVariance != nil {
					gauge(c.rewardVar, *v.RewardVariance, name, arm)
				}
			}
		}
		if ho := h.HeldOut; ho != nil {
			gauge(c.logLik, ho.LogLikPerReward, name, "version")
			gauge(c.logLik, ho.RecentLogLikPerReward, name, "recent")
			if ho.CalibrationError != nil {
				gauge(c.ece, *ho.CalibrationError, name, "version")
			}
			if ho.RecentCalibrationError != nil {
				gauge(c.ece, *ho.RecentCalibrationError, name, "recent")
			}
		}
		alarm := 0.0
		if h.LockIn.Alarm {
			alarm = 1
		}
		gauge(c.alarm, alarm, name)
		gauge(c.topShare, h.LockIn.TopShare, name)
	}
}
