package columns

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/avro"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// UnsignedProp marks an Avro long that holds a Protobuf uint64 or fixed64:
// Avro has no unsigned type, so the long holds values up to 2^63-1 (a
// larger one is a record error in avro files), and parquet writes the
// column as INT64 with the UINT_64 logical type, which holds all of them.
const UnsignedProp = "spillway.unsigned"

// Message is the Columns of one Protobuf message, or why it has none.
type Message struct {
	Columns *Columns
	Err     error
}

// Protobuf maps every message of fd, nested ones included, onto Avro:
//
//	int32, sint32, sfixed32          int
//	int64, sint64, sfixed64          long
//	uint32, fixed32                  long
//	uint64, fixed64                  long marked UnsignedProp
//	float, double, bool, string, bytes: the same
//	enum                             string: the value's name (an unknown
//	                                 number as its decimal digits)
//	message                          record (namespace: its parent's full name)
//	repeated                         array;  map: map, keys as strings
//	a field with presence (a message, proto3 optional, a oneof member,
//	  proto2 optional)               ["null", T], null when unset
//	google.protobuf.Timestamp        long timestamp-micros (nanoseconds
//	                                 below the microsecond are dropped)
//	google.protobuf.*Value wrappers  their scalar (nullable as a message)
//	google.protobuf.Struct, Value, ListValue, and messages without fields:
//	                                 string holding the protojson
//
// A message that contains itself, at any depth, has no fixed columns: its
// Columns is an error naming the field where it recurs.
func Protobuf(id int, fd protoreflect.FileDescriptor) map[string]*Message {
	out := map[string]*Message{}
	var walk func(msgs protoreflect.MessageDescriptors)
	walk = func(msgs protoreflect.MessageDescriptors) {
		for i := range msgs.Len() {
			md := msgs.Get(i)
			out[string(md.FullName())] = protoMessageColumns(id, md, maxColumnsFields)
			walk(md.Messages())
		}
	}
	walk(fd.Messages())
	return out
}

// protoMessageColumns maps md, refusing it past maxFields fields.
func protoMessageColumns(id int, md protoreflect.MessageDescriptor, maxFields int) *Message {
	b := protoBuilder{onPath: map[protoreflect.FullName]bool{}, maxFields: maxFields}
	node, conv, err := b.message(md, string(md.FullName()))
	if err != nil {
		return &Message{Err: fmt.Errorf("%w: schema id %d: message %s has no fixed columns for avro and parquet: %w", ErrUndecodable, id, md.FullName(), err)}
	}
	sch, err := node.Schema()
	if err != nil {
		return &Message{Err: fmt.Errorf("%w: schema id %d: message %s as an Avro schema: %w", ErrUndecodable, id, md.FullName(), err)}
	}
	return &Message{Columns: &Columns{Schema: sch, Name: string(md.FullName()), value: func(data []byte) (any, error) {
		_, rest, err := header.DecodeIndex(data, MaxProtoIndexes)
		if err != nil {
			return nil, fmt.Errorf("%w: the message indexes after schema id %d: %w", ErrUndecodable, id, err)
		}
		msg := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(rest, msg); err != nil {
			return nil, fmt.Errorf("%w: does not decode as %s of schema id %d: %w", ErrUndecodable, md.FullName(), id, err)
		}
		v, err := conv(protoreflect.ValueOfMessage(msg))
		if err != nil {
			return nil, fmt.Errorf("%w: %s of schema id %d: %w", ErrUndecodable, md.FullName(), id, err)
		}
		return v, nil
	}}}
}

// protoConv turns a decoded Protobuf value into its Avro value.
type protoConv func(v protoreflect.Value) (any, error)

type protoBuilder struct {
	onPath map[protoreflect.FullName]bool
	depth  int
	// fields counts the fields mapped so far, up to maxFields.
	fields, maxFields int
}

// maxProtoDepth bounds the nesting of messages mapped to columns.
const maxProtoDepth = 64

// maxColumnsFields bounds the fields of one schema's columns, counted with
// every use of a type: a message used twice in each of a chain of
// messages doubles at each link, which no file could hold.
const maxColumnsFields = 1 << 13

var errRecursive = errors.New("a recursive message has no fixed columns (write it with a text format such as jsonl, where it is JSON)")

// message maps a message, reached by path (for errors), to a non-null node.
func (b *protoBuilder) message(md protoreflect.MessageDescriptor, path string) (avro.SchemaNode, protoConv, error) {
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		secs, nanos := md.Fields().ByName("seconds"), md.Fields().ByName("nanos")
		return avro.SchemaNode{Type: "long", LogicalType: "timestamp-micros"}, func(v protoreflect.Value) (any, error) {
			m := v.Message()
			return time.Unix(m.Get(secs).Int(), m.Get(nanos).Int()).UTC(), nil
		}, nil
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		fd := md.Fields().ByName("value")
		n, conv, err := b.scalar(fd, path)
		return n, func(v protoreflect.Value) (any, error) { return conv(v.Message().Get(fd)) }, err
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		return jsonProto()
	}
	if md.Fields().Len() == 0 {
		return jsonProto()
	}
	if b.onPath[md.FullName()] {
		return avro.SchemaNode{}, nil, fmt.Errorf("field %s: message %s contains itself: %w", path, md.FullName(), errRecursive)
	}
	if b.depth >= maxProtoDepth {
		return avro.SchemaNode{}, nil, fmt.Errorf("field %s: messages nest deeper than %d levels", path, maxProtoDepth)
	}
	b.onPath[md.FullName()] = true
	b.depth++
	defer func() { delete(b.onPath, md.FullName()); b.depth-- }()

	n := avro.SchemaNode{Type: "record", Name: string(md.Name()), Namespace: string(md.FullName().Parent())}
	type field struct {
		fd       protoreflect.FieldDescriptor
		name     string
		presence bool
		conv     protoConv
	}
	var fields []field
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		f := field{fd: fd, name: string(fd.Name())}
		fpath := path + "." + f.name
		if b.fields++; b.fields > b.maxFields {
			return avro.SchemaNode{}, nil, fmt.Errorf("field %s: the message expands to more than %d fields", fpath, b.maxFields)
		}
		var fn avro.SchemaNode
		var err error
		switch {
		case fd.IsMap():
			fn, f.conv, err = b.mapField(fd, fpath)
		case fd.IsList():
			fn, f.conv, err = b.listField(fd, fpath)
		default:
			fn, f.conv, err = b.scalar(fd, fpath)
			f.presence = fd.HasPresence()
		}
		if err != nil {
			return avro.SchemaNode{}, nil, err
		}
		if f.presence {
			n.Fields = append(n.Fields, nullField(f.name, fn))
		} else {
			n.Fields = append(n.Fields, avro.SchemaField{Name: f.name, Type: fn})
		}
		fields = append(fields, f)
	}
	return n, func(v protoreflect.Value) (any, error) {
		m := v.Message()
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			if f.presence && !m.Has(f.fd) {
				out[f.name] = nil
				continue
			}
			fv, err := f.conv(m.Get(f.fd))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
			out[f.name] = fv
		}
		return out, nil
	}, nil
}

// jsonProto is the node of a message kept as its protojson.
func jsonProto() (avro.SchemaNode, protoConv, error) {
	return avro.SchemaNode{Type: "string"}, func(v protoreflect.Value) (any, error) {
		b, err := protojson.Marshal(v.Message().Interface())
		if err != nil {
			return nil, err
		}
		return string(b), nil
	}, nil
}

func (b *protoBuilder) listField(fd protoreflect.FieldDescriptor, path string) (avro.SchemaNode, protoConv, error) {
	item, conv, err := b.scalar(fd, path)
	if err != nil {
		return avro.SchemaNode{}, nil, err
	}
	return avro.SchemaNode{Type: "array", Items: &item}, func(v protoreflect.Value) (any, error) {
		l := v.List()
		out := make([]any, l.Len())
		for i := range l.Len() {
			var err error
			if out[i], err = conv(l.Get(i)); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return out, nil
	}, nil
}

func (b *protoBuilder) mapField(fd protoreflect.FieldDescriptor, path string) (avro.SchemaNode, protoConv, error) {
	val, conv, err := b.scalar(fd.MapValue(), path)
	if err != nil {
		return avro.SchemaNode{}, nil, err
	}
	return avro.SchemaNode{Type: "map", Values: &val}, func(v protoreflect.Value) (any, error) {
		out := make(map[string]any, v.Map().Len())
		var err error
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			var x any
			if x, err = conv(mv); err != nil {
				err = fmt.Errorf("[%s]: %w", k.String(), err)
				return false
			}
			// Keys are strings in Avro and Parquet maps: an integer or
			// bool key is written as its decimal digits or true/false.
			out[k.String()] = x
			return true
		})
		return out, err
	}, nil
}

// scalar maps one value of fd (an item of a repeated field, a map value, a
// singular field) to a non-null node.
func (b *protoBuilder) scalar(fd protoreflect.FieldDescriptor, path string) (avro.SchemaNode, protoConv, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return avro.SchemaNode{Type: "boolean"}, func(v protoreflect.Value) (any, error) { return v.Bool(), nil }, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return avro.SchemaNode{Type: "int"}, func(v protoreflect.Value) (any, error) { return int32(v.Int()), nil }, nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return avro.SchemaNode{Type: "long"}, func(v protoreflect.Value) (any, error) { return v.Int(), nil }, nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return avro.SchemaNode{Type: "long"}, func(v protoreflect.Value) (any, error) { return int64(v.Uint()), nil }, nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return avro.SchemaNode{Type: "long", Props: map[string]any{UnsignedProp: true}}, func(v protoreflect.Value) (any, error) { return v.Uint(), nil }, nil
	case protoreflect.FloatKind:
		return avro.SchemaNode{Type: "float"}, func(v protoreflect.Value) (any, error) { return float32(v.Float()), nil }, nil
	case protoreflect.DoubleKind:
		return avro.SchemaNode{Type: "double"}, func(v protoreflect.Value) (any, error) { return v.Float(), nil }, nil
	case protoreflect.StringKind:
		return avro.SchemaNode{Type: "string"}, func(v protoreflect.Value) (any, error) { return v.String(), nil }, nil
	case protoreflect.BytesKind:
		return avro.SchemaNode{Type: "bytes"}, func(v protoreflect.Value) (any, error) { return v.Bytes(), nil }, nil
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		return avro.SchemaNode{Type: "string"}, func(v protoreflect.Value) (any, error) {
			if ev := values.ByNumber(v.Enum()); ev != nil {
				return string(ev.Name()), nil
			}
			return strconv.Itoa(int(v.Enum())), nil
		}, nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return b.message(fd.Message(), path)
	}
	return avro.SchemaNode{}, nil, fmt.Errorf("field %s: kind %s has no column type", path, fd.Kind())
}
