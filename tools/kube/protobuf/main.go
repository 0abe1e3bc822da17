// Command protobuf writes what kubeflux's API server needs to turn Kubernetes protobuf messages into the JSON the
// same Go objects marshal to, and back, read from the Go types themselves with reflect (tools/kube/protobuf_gen.py
// runs it at build time):
//
//	go run . table OUT.json      the registered kinds and, per proto message, each field's JSON name and Go shape
//	go run . fixtures IN OUT     each JSON object of IN encoded by the real protobuf serializer, decoded and
//	                             marshalled to JSON again (the test fixtures of tests/sim/apiserver/data/protobuf)
//
// The table says, for every field of every message reachable from a kind client-go's scheme registers: its proto
// number, its JSON name, whether the Go field is a pointer, a slice, a map or []byte (nil-able: absent on the wire
// means nil), whether its JSON tag says omitempty or omitzero, and whether it is inlined into its parent's JSON.
// Types with their own JSON form (Time, Quantity, IntOrString ...) are named in "special"; named slice types that
// protobuf wraps in a message of one repeated field (ExtraValue, Verbs) are marked "list".
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	kscheme "k8s.io/client-go/kubernetes/scheme"
)

// Field is one proto field of a message, as its Go struct field marshals it to JSON.
type Field struct {
	JSON      string `json:"json"`
	Nilable   bool   `json:"nilable,omitempty"`
	Pointer   bool   `json:"pointer,omitempty"`
	OmitEmpty bool   `json:"omitempty,omitempty"`
	OmitZero  bool   `json:"omitzero,omitempty"`
	Inline    bool   `json:"inline,omitempty"`
	Go        string `json:"go"`
}

// Message is one proto message: the fields of its Go struct, or what its Go type is when it is not a plain struct.
type Message struct {
	Go      string           `json:"go"`
	Special string           `json:"special,omitempty"`
	List    bool             `json:"list,omitempty"`
	Fields  map[string]Field `json:"fields,omitempty"`
}

// Table is the file the generator writes.
type Table struct {
	Kinds    map[string]string  `json:"kinds"`
	Messages map[string]Message `json:"messages"`
}

var (
	jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	protoMarshal  = reflect.TypeOf((*interface{ Marshal() ([]byte, error) })(nil)).Elem()
)

func protoName(t reflect.Type) string {
	return strings.ReplaceAll(t.PkgPath(), "/", ".") + "." + t.Name()
}

func isProto(t reflect.Type) bool {
	return t.Name() != "" && reflect.PointerTo(t).Implements(protoMarshal)
}

type walker struct{ messages map[string]Message }

// walk records t (a named type with a proto message) and every message type its fields reach.
func (w *walker) walk(t reflect.Type) {
	name := protoName(t)
	if _, seen := w.messages[name]; seen {
		return
	}
	message := Message{Go: t.PkgPath() + "." + t.Name()}
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
		message.Special = t.Name()
		w.messages[name] = message
		return
	}
	if t.Kind() == reflect.Slice {
		message.List = true
		w.messages[name] = message
		w.reach(t.Elem())
		return
	}
	if t.Kind() != reflect.Struct {
		fail("%s: a proto message of Go kind %s", name, t.Kind())
	}
	message.Fields = map[string]Field{}
	w.messages[name] = message
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("protobuf")
		if tag == "" {
			continue
		}
		parts := strings.Split(tag, ",")
		if len(parts) < 2 {
			fail("%s.%s: protobuf tag %q", name, f.Name, tag)
		}
		number, err := strconv.Atoi(parts[1])
		if err != nil {
			fail("%s.%s: protobuf tag %q", name, f.Name, tag)
		}
		jsonTag := strings.Split(f.Tag.Get("json"), ",")
		field := Field{JSON: jsonTag[0], Go: f.Type.String()}
		for _, option := range jsonTag[1:] {
			switch option {
			case "omitempty":
				field.OmitEmpty = true
			case "omitzero":
				field.OmitZero = true
			case "inline":
				field.Inline = true
			}
		}
		if field.JSON == "" && !field.Inline {
			field.JSON = f.Name
		}
		switch f.Type.Kind() {
		case reflect.Pointer:
			field.Pointer, field.Nilable = true, true
		case reflect.Slice, reflect.Map:
			field.Nilable = !isProto(f.Type) || f.Type.Kind() == reflect.Slice
		}
		message.Fields[strconv.Itoa(number)] = field
		w.reach(f.Type)
	}
}

// reach walks the message types inside t (through pointers, slices and map values).
func (w *walker) reach(t reflect.Type) {
	for {
		if isProto(t) {
			w.walk(t)
			return
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice:
			t = t.Elem()
		case reflect.Map:
			w.reach(t.Key())
			t = t.Elem()
		default:
			return
		}
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "protobuf: "+format+"\n", args...)
	os.Exit(1)
}

// newScheme is client-go's scheme (every built-in kind a Go client sends or reads) with the meta.k8s.io/v1 kinds
// the server answers metadata-only and table requests with.
func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kscheme.AddToScheme, metav1.AddMetaToScheme} {
		if err := add(scheme); err != nil {
			fail("scheme: %v", err)
		}
	}
	metav1.AddToGroupVersion(scheme, metav1.Unversioned)
	return scheme
}

func table() Table {
	w := &walker{messages: map[string]Message{}}
	kinds := map[string]string{}
	for gvk, t := range newScheme().AllKnownTypes() {
		if !isProto(t) || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		kinds[gvk.GroupVersion().String()+"/"+gvk.Kind] = protoName(t)
		w.walk(t)
	}
	return Table{Kinds: kinds, Messages: w.messages}
}

// Fixture is one object as the real serializer encodes it (base64), and the JSON Go marshals the object decoded
// from those bytes to (what a JSON client would have sent for the same Go object).
type Fixture struct {
	Name     string          `json:"name"`
	Protobuf string          `json:"protobuf"`
	JSON     json.RawMessage `json:"json"`
}

func fixtures(in []byte) []Fixture {
	var inputs []struct {
		Name   string          `json:"name"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(in, &inputs); err != nil {
		fail("fixtures: %v", err)
	}
	scheme := newScheme()
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	encoder := protobuf.NewSerializer(scheme, scheme)
	var out []Fixture
	for _, input := range inputs {
		obj, _, err := decoder.Decode(input.Object, nil, nil)
		if err != nil {
			fail("fixture %s: %v", input.Name, err)
		}
		var buf bytes.Buffer
		if err := encoder.Encode(obj, &buf); err != nil {
			fail("fixture %s: %v", input.Name, err)
		}
		decoded, _, err := encoder.Decode(buf.Bytes(), nil, nil)
		if err != nil {
			fail("fixture %s: decoding its protobuf: %v", input.Name, err)
		}
		again, err := json.Marshal(decoded)
		if err != nil {
			fail("fixture %s: %v", input.Name, err)
		}
		out = append(out, Fixture{input.Name, base64.StdEncoding.EncodeToString(buf.Bytes()), again})
	}
	return out
}

func write(path string, value any) {
	data, err := json.MarshalIndent(value, "", " ")
	if err != nil {
		fail("%v", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		fail("%v", err)
	}
}

func main() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "table":
		write(os.Args[2], table())
	case len(os.Args) == 4 && os.Args[1] == "fixtures":
		in, err := os.ReadFile(os.Args[2])
		if err != nil {
			fail("%v", err)
		}
		write(os.Args[3], fixtures(in))
	default:
		names := []string{"table OUT.json", "fixtures IN.json OUT.json"}
		sort.Strings(names)
		fail("usage: protobuf %s", strings.Join(names, " | "))
	}
}
