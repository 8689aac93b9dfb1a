package main

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/refinery-bandits/refinery/simulators"
)

// serve --simulate's mushroom sends each mushroom as its row of the
// data file (attribute: code) and knows its rewards: +5 for eating an
// edible one, -15 expected for a poisonous one (+5 or -35 on the coin),
// 0 for passing; a draw takes one IntN and one Float64 of the stream, as
// the driver's own copy of the environment did before it used
// simulators.Mushroom.
func TestSimEnvMushroomSendsTheRows(t *testing.T) {
	dir := sharedMushroomDir(t)
	env, err := newSimEnv("mushroom", dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := simulators.LoadMushroom(dir + "/" + simulators.MushroomFile)
	if err != nil {
		t.Fatal(err)
	}
	row := func(i int) map[string]any {
		m := map[string]any{}
		for j, attr := range simulators.MushroomAttributes {
			m[attr] = d.Rows[i][j]
		}
		return m
	}
	decoded := func(raw json.RawMessage) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	mush := env.env.(*simulators.Mushroom)
	if mush.Len() != len(d.Rows) {
		t.Fatalf("%d mushrooms, the file has %d", mush.Len(), len(d.Rows))
	}
	for i := range d.Rows {
		x, expected := mush.At(i)
		raw, err := env.enc.Decode(x)
		if err != nil {
			t.Fatalf("mushroom %d: %v", i, err)
		}
		want := []float64{-15, 0}
		if d.Edible[i] {
			want[0] = 5
		}
		if got := decoded(raw); !reflect.DeepEqual(got, row(i)) || !reflect.DeepEqual(expected, want) {
			t.Fatalf("mushroom %d: context %v, expected %v; want %v, %v", i, got, expected, row(i), want)
		}
	}
	rng, ref := rand.New(rand.NewPCG(7, 8)), rand.New(rand.NewPCG(7, 8))
	for range 200 {
		raw, _, realized, err := env.next(rng)
		if err != nil {
			t.Fatal(err)
		}
		i, loss := ref.IntN(len(d.Rows)), ref.Float64() < 0.5
		want := []float64{5, 0}
		if !d.Edible[i] && loss {
			want[0] = -35
		}
		if got := decoded(raw); !reflect.DeepEqual(got, row(i)) || !reflect.DeepEqual(realized, want) {
			t.Fatalf("draw of mushroom %d (loss %v): context %v, realized %v; want %v, %v", i, loss, got, realized, row(i), want)
		}
	}
}

// serve --simulate's wheel sends each context as {"x1": .., "x2": ..},
// the wheel's two inputs, with the wheel's rewards.
func TestSimEnvWheelSendsItsInputs(t *testing.T) {
	env, err := newSimEnv("wheel", "")
	if err != nil {
		t.Fatal(err)
	}
	wheel, err := simulators.ParseEnv("wheel", "")
	if err != nil {
		t.Fatal(err)
	}
	rng, ref := rand.New(rand.NewPCG(3, 4)), rand.New(rand.NewPCG(3, 4))
	for range 100 {
		raw, expected, realized, err := env.next(rng)
		if err != nil {
			t.Fatal(err)
		}
		st := wheel.Next(ref)
		var got map[string]float64
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if want := map[string]float64{"x1": st.X[0], "x2": st.X[1]}; !reflect.DeepEqual(got, want) ||
			!reflect.DeepEqual(expected, st.Expected) || !reflect.DeepEqual(realized, st.Realized) {
			t.Fatalf("step: %s %v %v; want %v %v %v", raw, expected, realized, want, st.Expected, st.Realized)
		}
	}
}
