package bandit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/nn"
)

// Under model.likelihood "auto" a bandit whose rewards are 0 or 1 trains
// under the Bernoulli likelihood; the first other reward switches it to
// the Gaussian one, restarting the network and training on every stored
// reward. Under "bernoulli" a reward outside [0, 1] is refused, naming
// the field, and nothing is stored.
func TestLikelihoodFollowsTheRewards(t *testing.T) {
	ctx := context.Background()
	svc := stepService(t, 2, 5)
	decide := func(a *bandit.Agent, i int) string {
		color := []string{"red", "blue"}[i%2]
		out, err := a.Decide(ctx, bandit.DecideRequest{Context: []byte(fmt.Sprintf(`{"color": %q, "size": 1}`, color))})
		if err != nil {
			t.Fatal(err)
		}
		return out.Decision.EventID
	}
	auto := smallConfig(bandit.MeanFieldTS)
	a, err := svc.Create(ctx, auto)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := a.Reward(ctx, decide(a, i), float64(i%2)); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Family(); got != nn.Bernoulli {
		t.Fatalf("after 10 rewards of 0 and 1 the family is %s, want bernoulli", got)
	}
	for i := 10; i < 15; i++ {
		if err := a.Reward(ctx, decide(a, i), 2.5*float64(i%3)); err != nil {
			t.Fatal(err)
		}
	}
	if got, st := a.Family(), a.Status(); got != nn.Gaussian || st.TrainedRows != 15 {
		t.Fatalf("after a reward of 2.5 the family is %s with %d trained rows, want gaussian with 15", got, st.TrainedRows)
	}

	strict := smallConfig(bandit.MeanFieldTS)
	strict.Name = "strict"
	strict.Model.Likelihood = bandit.LikelihoodBernoulli
	b, err := svc.Create(ctx, strict)
	if err != nil {
		t.Fatal(err)
	}
	id := decide(b, 0)
	err = b.Reward(ctx, id, 5)
	var ve *bandit.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "value" {
		t.Fatalf("a reward of 5 on a bernoulli bandit: %v, want a validation error naming value", err)
	}
	if err := b.Reward(ctx, id, 1); err != nil {
		t.Fatalf("the decision's reward of 1 after the refused 5: %v", err)
	}
}
