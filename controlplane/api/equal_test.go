package api

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestEqualResourceLists checks the resource lists' own comparison against
// reflect.DeepEqual (EqualValues) and by amount (SemanticEqual), on pairs
// of lists drawn from few names and amounts, so that most pairs share
// names and many share amounts written differently ("1" and "1000m").
func TestEqualResourceLists(t *testing.T) {
	names := []string{"cpu", "memory", "example.com/gpu"}
	amounts := []string{"1", "1000m", "2", "500Mi", "524288Ki", "0"}
	random := func(rng *rand.Rand) ResourceList {
		if rng.IntN(8) == 0 {
			return nil
		}
		rl := ResourceList{}
		for range rng.IntN(len(names) + 1) {
			rl[names[rng.IntN(len(names))]] = MustParseQuantity(amounts[rng.IntN(len(amounts))])
		}
		return rl
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var equal, semantic int
	for range 20000 {
		a, b := random(rng), random(rng)
		if got, want := EqualValues(reflect.ValueOf(a), reflect.ValueOf(b)), reflect.DeepEqual(a, b); got != want {
			t.Fatalf("EqualValues(%v, %v) = %v, reflect.DeepEqual says %v", a, b, got, want)
		}
		want := len(a) == len(b)
		for k, q := range a {
			r, ok := b[k]
			want = want && ok && q.MilliValue() == r.MilliValue()
		}
		if got := SemanticEqual(a, b); got != want {
			t.Fatalf("SemanticEqual(%v, %v) = %v, want %v", a, b, got, want)
		}
		if reflect.DeepEqual(a, b) {
			equal++
		}
		if want {
			semantic++
		}
	}
	// Both answers must have come up often, and amounts equal but written
	// differently too.
	if equal < 500 || semantic-equal < 500 {
		t.Fatalf("%d pairs equal, %d more equal by amount: the draw does not test both", equal, semantic-equal)
	}
}
