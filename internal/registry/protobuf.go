package registry

import (
	"context"
	"fmt"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/spillway/spillway/internal/registry/columns"
)

// parseProto compiles a registered .proto, with its references (imports
// registered under other subjects, by import path) and Google's standard
// imports, with bufbuild/protocompile.
func (r *Registry) parseProto(ctx context.Context, id int, s sr.Schema) (protoreflect.FileDescriptor, error) {
	main := fmt.Sprintf("spillway-registered-%d.proto", id)
	srcs := map[string]string{main: s.Schema}
	if err := r.protoRefs(ctx, srcs, s.References); err != nil {
		return nil, err
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(srcs),
	})}
	files, err := c.Compile(ctx, main)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return files[0], nil
}

func (r *Registry) protoRefs(ctx context.Context, srcs map[string]string, refs []sr.SchemaReference) error {
	for _, ref := range refs {
		if _, ok := srcs[ref.Name]; ok {
			continue
		}
		if r.cl == nil {
			return fmt.Errorf("%w: import %q: a registry without a client can't fetch references", ErrUndecodable, ref.Name)
		}
		ss, err := r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return fmt.Errorf("import %q (subject %s version %d): %w", ref.Name, ref.Subject, ref.Version, err)
		}
		srcs[ref.Name] = ss.Schema.Schema
		if err := r.protoRefs(ctx, srcs, ss.References); err != nil {
			return err
		}
	}
	return nil
}

// protoJSON renders Protobuf messages as JSON: field names as in the
// .proto, every field present (defaults included), so that every record of
// a schema has the same fields.
var protoJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// ProtoJSON decodes data, a Protobuf value after the schema id (message
// indexes first, as the wire format has them), with s, and appends it to
// dst as JSON.
func (s *Schema) ProtoJSON(dst, data []byte) ([]byte, error) {
	if s.Proto == nil {
		return nil, fmt.Errorf("%w: schema id %d is not Protobuf", ErrUndecodable, s.ID)
	}
	index, rest, err := header.DecodeIndex(data, maxProtoIndexes)
	if err != nil {
		return nil, fmt.Errorf("%w: the message indexes after schema id %d: %w", ErrUndecodable, s.ID, err)
	}
	md, err := messageAt(s.Proto, index)
	if err != nil {
		return nil, fmt.Errorf("%w: schema id %d: %w", ErrUndecodable, s.ID, err)
	}
	msg := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(rest, msg); err != nil {
		return nil, fmt.Errorf("%w: does not decode as %s of schema id %d: %w", ErrUndecodable, md.FullName(), s.ID, err)
	}
	out, err := protoJSON.MarshalAppend(dst, msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s of schema id %d as JSON: %w", ErrUndecodable, md.FullName(), s.ID, err)
	}
	return out, nil
}

// maxProtoIndexes bounds the message indexes read from a value.
const maxProtoIndexes = columns.MaxProtoIndexes

// messageAt follows the wire format's message indexes: the first picks a
// top-level message of the file, each next one a message nested in it.
func messageAt(fd protoreflect.FileDescriptor, index []int) (protoreflect.MessageDescriptor, error) {
	msgs := fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range index {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v is not in the schema", index)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, fmt.Errorf("no message index")
	}
	return md, nil
}
