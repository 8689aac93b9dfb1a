package simulators_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/refinery-bandits/refinery/simulators"
)

func ExampleParseEnv() {
	env, err := simulators.ParseEnv("wheel:delta=0.5", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(env.Name(), env.ArmNames(), env.NumFeatures())
	// Output: wheel:delta=0.5 [a1 a2 a3 a4 a5] 2
}

func ExampleWheel_Expected() {
	w, _ := simulators.NewWheel(simulators.DefaultWheelConfig())
	fmt.Println(w.Expected([]float64{0.1, 0.2}, nil))  // inside the ring: a1
	fmt.Println(w.Expected([]float64{0.7, -0.7}, nil)) // outside, x1 > 0, x2 < 0: a3
	// Output:
	// [1.2 1 1 1 1]
	// [1.2 1 50 1 1]
}

func ExampleReadClassificationCSV() {
	const data = `size,colour,label
1.0,red,apple
2.0,green,pear
3.0,red,apple
`
	env, err := simulators.ReadClassificationCSV(strings.NewReader(data), "fruit.csv", simulators.HeaderAuto)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(env.ArmNames(), env.FeatureNames())
	// Output: [apple pear] [size colour=green colour=red]
}

// A run: draw a step, let a policy choose (here: always arm 0), and
// record the regret.
func ExampleRegret() {
	env, _ := simulators.NewWheel(simulators.DefaultWheelConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	regret := simulators.NewRegret(1000)
	for range 3000 {
		step := env.Next(rng)
		regret.Record(step, 0) // the safe arm a1
	}
	for _, p := range regret.Points() {
		fmt.Printf("%d %.0f\n", p.Step, p.Expected)
	}
	// Output:
	// 1000 5124
	// 2000 10297
	// 3000 14494
}

func ExampleFetchMushroom() {
	// Copy the shared copy into ./data, or download it, checking the
	// sha256 either way.
	f, err := simulators.FetchMushroom(context.Background(), "data")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(f.Path)
}
