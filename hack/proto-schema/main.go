// Command proto-schema writes the table the sidecar reads built-in kinds'
// protobuf with (src/informer/protobuf/generated.rs), and the cases that
// table is tested against (corpus.go).
//
// Every type client-go registers is walked by reflection. A struct field's
// tags say both how it is encoded in protobuf (`protobuf:"bytes,3,rep,..."`)
// and how encoding/json writes it (`json:"name,omitempty"`), so the table
// lets the sidecar write, from the protobuf the API server sends, the JSON
// client-go would write of the object it decoded. Types whose encodings are
// written by hand (metav1.Time, resource.Quantity, intstr.IntOrString, ...)
// become named special cases; any other such type stops the generator, so a
// new one is never mapped by guesswork.
//
//	go run . schema > ../../src/informer/protobuf/generated.rs
//	go run . corpus [-per-kind N] [-seed S] > corpus.jsonl
package main

import (
	"encoding"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

// special names the types whose protobuf and JSON are written by hand, and
// the Rust variant each becomes.
var special = map[reflect.Type]string{
	reflect.TypeOf(metav1.Time{}):          "Time",
	reflect.TypeOf(metav1.MicroTime{}):     "MicroTime",
	reflect.TypeOf(intstr.IntOrString{}):   "IntOrString",
	reflect.TypeOf(resource.Quantity{}):    "Quantity",
	reflect.TypeOf(runtime.RawExtension{}): "RawJson",
	reflect.TypeOf(metav1.FieldsV1{}):      "RawJson",
}

var (
	jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshaler = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	protoMarshal  = "Marshal" // gogo's generated method on every message type
)

type field struct {
	number    int
	json      string
	value     string // a Rust `Value`
	repeated  bool
	omitEmpty bool
	omitZero  bool
	pointer   bool
	inline    bool
}

// flags is the field's Rust flag set, `0` when none.
func (f field) flags() string {
	var set []string
	for _, flag := range []struct {
		on   bool
		name string
	}{{f.repeated, "REPEATED"}, {f.omitEmpty, "OMIT_EMPTY"}, {f.omitZero, "OMIT_ZERO"}, {f.pointer, "POINTER"}, {f.inline, "INLINE"}} {
		if flag.on {
			set = append(set, flag.name)
		}
	}
	if len(set) == 0 {
		return "0"
	}
	return strings.Join(set, " | ")
}

type message struct {
	name   string
	fields []field
}

type generator struct {
	index    map[reflect.Type]int
	messages []message
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "proto-schema: "+format+"\n", args...)
	os.Exit(1)
}

func typeName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// messageOf returns the table index of struct type t, adding it (and every
// type it reaches) first.
func (g *generator) messageOf(t reflect.Type) int {
	if i, ok := g.index[t]; ok {
		return i
	}
	i := len(g.messages)
	g.index[t] = i
	g.messages = append(g.messages, message{name: typeName(t)})
	var fields []field
	for n := range t.NumField() {
		f := t.Field(n)
		tag, hasProto := f.Tag.Lookup("protobuf")
		jsonTag := f.Tag.Get("json")
		if jsonTag == "-" {
			continue
		}
		if !hasProto {
			if f.Type == reflect.TypeOf(metav1.TypeMeta{}) {
				continue // apiVersion and kind: not in an object's protobuf; the envelope has them
			}
			fail("%s.%s has no protobuf tag", typeName(t), f.Name)
		}
		fields = append(fields, g.field(t, f, tag, jsonTag))
	}
	g.messages[i].fields = fields
	return i
}

func (g *generator) field(owner reflect.Type, f reflect.StructField, protoTag, jsonTag string) field {
	parts := strings.Split(protoTag, ",")
	number, err := strconv.Atoi(parts[1])
	if err != nil {
		fail("%s.%s: protobuf tag %q", typeName(owner), f.Name, protoTag)
	}
	out := field{number: number}
	name, options, _ := strings.Cut(jsonTag, ",")
	for _, option := range strings.Split(options, ",") {
		switch option {
		case "omitempty":
			out.omitEmpty = true
		case "omitzero":
			out.omitZero = true
		case "inline":
			out.inline = true
		case "":
		default:
			fail("%s.%s: json option %q", typeName(owner), f.Name, option)
		}
	}
	if name == "" && !out.inline {
		if f.Anonymous {
			out.inline = true
		} else {
			name = f.Name
		}
	}
	out.json = name

	t := f.Type
	if t.Kind() == reflect.Pointer {
		out.pointer = true
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Map:
		if t.Key().Kind() != reflect.String {
			fail("%s.%s: a map keyed by %s", typeName(owner), f.Name, t.Key())
		}
		out.repeated = false
		out.value = "Value::StringMap(&" + g.value(owner, f, t.Elem()) + ")"
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 && !isListMessage(t):
		out.repeated = true
		out.value = g.value(owner, f, t.Elem())
	default:
		// Some tags say "rep" of a pointer to one message; the Go type decides.
		out.repeated = false
		out.value = g.value(owner, f, t)
	}
	// The sidecar knows the zero value only of times (an empty message).
	if out.omitZero && !out.pointer && out.value != "Value::Special(Special::Time)" && out.value != "Value::Special(Special::MicroTime)" {
		fail("%s.%s: omitzero on %s", typeName(owner), f.Name, out.value)
	}
	if out.inline && !strings.HasPrefix(out.value, "Value::Message(") {
		fail("%s.%s: inline but not a message", typeName(owner), f.Name)
	}
	return out
}

// isListMessage: a named slice that is a message of its own in protobuf
// (`message ExtraValue { repeated string items = 1; }`), a JSON array.
func isListMessage(t reflect.Type) bool {
	if t.Name() == "" || t.Elem().Kind() == reflect.Uint8 {
		return false
	}
	_, ok := reflect.PointerTo(t).MethodByName(protoMarshal)
	return ok
}

// value is the Rust `Value` for one element of Go type t.
func (g *generator) value(owner reflect.Type, f reflect.StructField, t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if name, ok := special[t]; ok {
		return "Value::Special(Special::" + name + ")"
	}
	if t.Kind() == reflect.Slice && isListMessage(t) {
		if t.Elem().Kind() != reflect.String {
			fail("%s.%s: a list message of %s", typeName(owner), f.Name, t.Elem())
		}
		return "Value::Special(Special::StringList)"
	}
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) ||
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		fail("%s.%s: %s writes its own JSON and is not a known special case", typeName(owner), f.Name, typeName(t))
	}
	switch t.Kind() {
	case reflect.String:
		return "Value::String"
	case reflect.Bool:
		return "Value::Bool"
	case reflect.Int32:
		return "Value::Int32"
	case reflect.Int64:
		return "Value::Int64"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "Value::Bytes"
		}
	case reflect.Struct:
		return fmt.Sprintf("Value::Message(%d)", g.messageOf(t))
	}
	fail("%s.%s: no mapping for %s (%s)", typeName(owner), f.Name, t, t.Kind())
	return ""
}

type kind struct {
	apiVersion, kind string
	message          int
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: proto-schema schema | corpus [-per-kind N] [-seed S]")
	}
	switch os.Args[1] {
	case "schema":
		writeSchema()
	case "corpus":
		writeCorpus(os.Args[2:])
	default:
		fail("unknown command %q: schema or corpus", os.Args[1])
	}
}

// objectKinds are the kinds an informer caches, sorted: every registered
// kind with metadata (lists, options and WatchEvent have none).
func objectKinds() []schema.GroupVersionKind {
	objectMeta := reflect.TypeOf(metav1.ObjectMeta{})
	var kinds []schema.GroupVersionKind
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if m, ok := t.FieldByName("ObjectMeta"); !ok || m.Type != objectMeta {
			continue
		}
		kinds = append(kinds, gvk)
	}
	sort.Slice(kinds, func(i, j int) bool {
		a, b := kinds[i].GroupVersion().String(), kinds[j].GroupVersion().String()
		if a != b {
			return a < b
		}
		return kinds[i].Kind < kinds[j].Kind
	})
	return kinds
}

func writeSchema() {
	g := &generator{index: map[reflect.Type]int{}}
	var kinds []kind
	for _, gvk := range objectKinds() {
		t := scheme.Scheme.AllKnownTypes()[gvk]
		kinds = append(kinds, kind{gvk.GroupVersion().String(), gvk.Kind, g.messageOf(t)})
	}
	// A watch's ERROR event carries a Status.
	status := g.messageOf(reflect.TypeOf(metav1.Status{}))

	w := os.Stdout
	fmt.Fprintln(w, "// @generated by hack/gen-proto-schema (hack/proto-schema) from k8s.io/api "+moduleVersion()+"; do not edit.")
	fmt.Fprintln(w, "//! The protobuf-to-JSON table of every built-in kind, read from the Go types' struct tags.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "use super::schema::{Field, INLINE, Message, OMIT_EMPTY, OMIT_ZERO, POINTER, REPEATED, Special, Value};")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "/// `metav1.Status`, the object of a watch's ERROR event.\npub const STATUS: u16 = %d;\n\n", status)
	fmt.Fprintln(w, "/// Each built-in kind (apiVersion, kind) and its message; sorted.")
	fmt.Fprintln(w, "pub static KINDS: &[(&str, &str, u16)] = &[")
	for _, k := range kinds {
		fmt.Fprintf(w, "    (%q, %q, %d),\n", k.apiVersion, k.kind, k.message)
	}
	fmt.Fprintln(w, "];")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "/// Every message any kind reaches, by index.")
	fmt.Fprintln(w, "pub static MESSAGES: &[Message] = &[")
	for i, m := range g.messages {
		fmt.Fprintf(w, "    // %d\n    Message::new(\n        %q,\n        &[\n", i, m.name)
		for _, f := range m.fields {
			fmt.Fprintf(w, "            Field::new(%d, %q, %s, %s),\n", f.number, f.json, f.value, f.flags())
		}
		fmt.Fprintln(w, "        ],\n    ),")
	}
	fmt.Fprintln(w, "];")
}

// moduleVersion is the version of k8s.io/api this was built with.
func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/api" {
				return dep.Version
			}
		}
	}
	fail("no build information for k8s.io/api")
	return ""
}
