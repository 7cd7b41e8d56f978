package tableschema

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

func opt(id int, name string, typ iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{ID: id, Name: name, Type: typ}
}

func req(id int, name string, typ iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{ID: id, Name: name, Type: typ, Required: true}
}

func st(fields ...iceberg.NestedField) *iceberg.StructType {
	return &iceberg.StructType{FieldList: fields}
}

// mergeInto merges file into the table's fields tbl as package iceberg's evolve does.
func mergeInto(tbl, file []iceberg.NestedField) ([]iceberg.NestedField, *Merger, error) {
	sc := iceberg.NewSchema(0, tbl...)
	m := NewMerger("t", []*iceberg.Schema{sc}, sc)
	out, err := m.Merge("f.parquet", tbl, file)
	return out, m, err
}

// A new optional field in a list's element struct and in a map's value
// struct is added with the file's id; a change inside them, a new
// required field and a new field whose id the table gives another path
// are refused, naming the path.
func TestMergeNested(t *testing.T) {
	t.Parallel()
	str := iceberg.PrimitiveTypes.String
	item := func(extra ...iceberg.NestedField) *iceberg.ListType {
		return &iceberg.ListType{ElementID: 1011, Element: st(append([]iceberg.NestedField{req(1012, "sku", str)}, extra...)...), ElementRequired: true}
	}
	attrs := func(extra ...iceberg.NestedField) *iceberg.MapType {
		return &iceberg.MapType{KeyID: 1021, KeyType: str, ValueID: 1022, ValueType: st(append([]iceberg.NestedField{opt(1023, "v", str)}, extra...)...), ValueRequired: true}
	}
	value := func(items *iceberg.ListType, at *iceberg.MapType) []iceberg.NestedField {
		return []iceberg.NestedField{opt(2, "value", st(req(1010, "items", items), opt(1020, "attrs", at)))}
	}
	tbl := value(item(), attrs())

	got, m, err := mergeInto(tbl, value(item(opt(1013, "qty", iceberg.PrimitiveTypes.Int32)), attrs(opt(1024, "w", str))))
	if err != nil {
		t.Fatal(err)
	}
	sc := iceberg.NewSchema(1, got...)
	for path, id := range map[string]int{"value.items.element.qty": 1013, "value.attrs.value.w": 1024, "value.items.element.sku": 1012} {
		if f, ok := sc.FindFieldByName(path); !ok || f.ID != id {
			t.Errorf("merged schema %s: want %s with id %d", sc, path, id)
		}
	}
	if strings.Join(m.Added(), ",") != "value.items.element.qty,value.attrs.value.w" {
		t.Errorf("added %v", m.Added())
	}

	for _, c := range []struct {
		name string
		file []iceberg.NestedField
		want string
	}{
		{"required in an element", value(item(req(1013, "qty", str)), attrs()), `adds the required field "value.items.element.qty"`},
		{"type change in a map value", value(item(), &iceberg.MapType{KeyID: 1021, KeyType: str, ValueID: 1022, ValueType: st(opt(1023, "v", iceberg.PrimitiveTypes.Int64)), ValueRequired: true}), `field "value.attrs.value.v" changes type`},
		{"id of another path", value(item(opt(1023, "qty", str)), attrs()), `adds the field "value.items.element.qty" with id 1023, which the table gives "value.attrs.value.v"`},
		{"id of a new field of another path", value(item(opt(1030, "qty", str)), attrs(opt(1030, "w", str))), `adds the field "value.attrs.value.w" with id 1030, which the table gives "value.items.element.qty"`},
		{"renumbered", value(item(opt(1031, "sku", str)), attrs()), `numbers field "value.items.element.sku" 1031, but the table numbers it 1012`},
		{"required lacking", value(&iceberg.ListType{ElementID: 1011, Element: st(), ElementRequired: true}, attrs()), `lacks the required field "value.items.element.sku"`},
	} {
		if _, _, err := mergeInto(tbl, c.file); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %s", c.name, err, c.want)
		}
	}
}
