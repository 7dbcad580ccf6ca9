// Package cpuprofile is the -cpuprofile flag of bench/remote's Go programs.
package cpuprofile

import (
	"os"
	"runtime/pprof"
)

// Start profiles the whole process into the file at path until the returned
// stop is called (go tool pprof reads it).
func Start(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
