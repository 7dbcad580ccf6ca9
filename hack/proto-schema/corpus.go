package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
)

// corpusCase is one line of the corpus: an object's protobuf and the JSON
// client-go writes of what it decodes from it.
type corpusCase struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Protobuf   string          `json:"protobuf"` // base64
	JSON       json.RawMessage `json:"json"`
}

type protoObject interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// writeCorpus writes random objects of every kind the table has, filled by
// apimachinery's fuzzer (valid times, quantities and raw JSON; random
// everything else), one JSON line each. The expected JSON is that of the
// object decoded from its protobuf, which is what a client-go informer holds.
func writeCorpus(args []string) {
	flags := flag.NewFlagSet("corpus", flag.ExitOnError)
	perKind := flags.Int("per-kind", 20, "objects of each kind")
	seed := flags.Int64("seed", 1, "seed of the random objects")
	_ = flags.Parse(args)

	filler := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(*seed), serializer.NewCodecFactory(scheme.Scheme)).
		NilChance(0.3).NumElements(0, 3)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	written := 0
	for _, gvk := range objectKinds() {
		for range *perKind {
			object, err := scheme.Scheme.New(gvk)
			if err != nil {
				fail("%s: %v", gvk, err)
			}
			filler.Fill(object)
			data, err := object.(protoObject).Marshal()
			if err != nil {
				fail("%s: protobuf: %v", gvk, err)
			}
			decoded, _ := scheme.Scheme.New(gvk)
			if err := decoded.(protoObject).Unmarshal(data); err != nil {
				fail("%s: protobuf read back: %v", gvk, err)
			}
			text, err := json.Marshal(decoded)
			if err != nil {
				fail("%s: json: %v", gvk, err)
			}
			line := corpusCase{gvk.GroupVersion().String(), gvk.Kind, base64.StdEncoding.EncodeToString(data), text}
			if err := encoder.Encode(line); err != nil {
				fail("writing: %v", err)
			}
			written++
		}
	}
	fmt.Fprintf(os.Stderr, "proto-schema: %d objects of %d kinds\n", written, len(objectKinds()))
}
