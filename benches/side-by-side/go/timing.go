package main

import (
	"fmt"
	"sort"
	"time"
)

// Contender is one side of an interleaved comparison: its setup runs untimed and it
// returns the time of the span it measures.
type Contender struct {
	Label string
	Run   func() time.Duration
}

// interleave runs every contender once per iteration, the order rotated each iteration,
// after one untimed warm-up round, and prints one RESULT line per contender: figure,
// label, median, first and third quartiles, in seconds.
func interleave(figure string, iterations int, contenders []Contender) {
	for _, c := range contenders {
		c.Run()
	}
	rotate(figure, iterations, contenders)
}

// rotate is interleave without the warm-up round.
func rotate(figure string, iterations int, contenders []Contender) {
	n := len(contenders)
	samples := make([][]float64, n)
	for it := 0; it < iterations; it++ {
		for k := 0; k < n; k++ {
			idx := (it + k) % n
			samples[idx] = append(samples[idx], contenders[idx].Run().Seconds())
		}
	}
	for i, c := range contenders {
		v := samples[i]
		sort.Float64s(v)
		fmt.Printf("RESULT\t%s\t%s\t%.9f\t%.9f\t%.9f\n", figure, c.Label, v[len(v)/2], v[len(v)/4], v[len(v)*3/4])
	}
}

func memory(figure, label string, bytesPerUnit float64, note string) {
	fmt.Printf("MEMORY\t%s\t%s\t%.1f\t%s\n", figure, label, bytesPerUnit, note)
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
