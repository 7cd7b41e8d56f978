package tableschema

import (
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
)

// Merger merges files' schemas into a table's: the union of their fields,
// a file's new fields (optional ones only) taken as the file numbers them.
type Merger struct {
	table   string
	file    string         // the file being merged, for errors
	ids     map[int]string // the ids the table and the merged fields use, by path
	added   []string       // the paths of the fields the files add
	addedBy string         // the first file that adds one
	// current are the ids of the table's current schema, by path; own is
	// set when the files add the partition column (ownColumn), which is
	// not in added.
	current map[int]string
	own     bool
}

// NewMerger is a Merger into the table named table (for errors), whose
// schemas, current among them, are the metadata's. Every id any of them
// gave a field is kept with its path: a new field may not take one of
// them for another path, or Iceberg would read the other field's column
// as the new one (or back).
func NewMerger(table string, schemas []*iceberg.Schema, current *iceberg.Schema) *Merger {
	m := &Merger{table: table, ids: map[int]string{}, current: map[int]string{}}
	for _, sc := range schemas {
		walkIDs("", sc.Fields(), func(id int, path string) {
			if _, ok := m.ids[id]; !ok || sc.ID == current.ID {
				m.ids[id] = path
			}
		})
	}
	walkIDs("", current.Fields(), func(id int, path string) { m.current[id] = path })
	return m
}

// Merge merges fileFields, the root of the schema of the file at location,
// into tableFields (the table's, or what earlier files merged into them)
// and returns the
// merged fields. A field whose type changes, a required field the file
// lacks or makes optional, a new required field and a new field whose id
// the table gives another field are errors naming the field's path
// (value.user.email).
func (m *Merger) Merge(location string, tableFields, fileFields []iceberg.NestedField) ([]iceberg.NestedField, error) {
	m.file = location
	return m.fields("", tableFields, fileFields)
}

// Added are the paths of the fields the files merged so far add, without
// the partition column (AddsPartitionColumn).
func (m *Merger) Added() []string { return m.added }

// AddedBy is the first file that adds a field in Added.
func (m *Merger) AddedBy() string { return m.addedBy }

// AddsPartitionColumn reports whether the files add the Kafka partition's
// column, which a table gains whatever iceberg.evolve_schema says.
func (m *Merger) AddsPartitionColumn() bool { return m.own }

// fields merges the fields of a file's struct (the root, with prefix "")
// into the table's, and returns the merged fields: the table's, in its
// order, each merged with the file's of its id, then the file's new ones.
// A field the file lacks stays (Iceberg reads it null), unless required.
func (m *Merger) fields(prefix string, tfs, ffs []iceberg.NestedField) ([]iceberg.NestedField, error) {
	out := slices.Clone(tfs)
	at := map[int]int{}
	for i, tf := range tfs {
		at[tf.ID] = i
	}
	seen := map[int]bool{}
	for _, ff := range ffs {
		path := prefix + ff.Name
		i, ok := at[ff.ID]
		if !ok {
			if err := m.add(prefix, tfs, ff); err != nil {
				return nil, err
			}
			ff.Required = false
			out = append(out, ff)
			continue
		}
		seen[ff.ID] = true
		tf := tfs[i]
		if tf.Name != ff.Name {
			return nil, fmt.Errorf("iceberg: %s: file %s names field %d %q, but the table names it %q", m.table, m.file, ff.ID, path, prefix+tf.Name)
		}
		typ, err := m.typ(path, tf.Type, ff.Type)
		if err != nil {
			return nil, err
		}
		if tf.Required && !ff.Required {
			return nil, fmt.Errorf("iceberg: %s: field %q is required in the table but optional in file %s: an incompatible schema change", m.table, path, m.file)
		}
		out[i].Type = typ
	}
	for _, tf := range tfs {
		if !seen[tf.ID] && tf.Required {
			return nil, fmt.Errorf("iceberg: %s: file %s lacks the required field %q: an incompatible schema change (a required field can't be removed)", m.table, m.file, prefix+tf.Name)
		}
	}
	return out, nil
}

// add checks a field the file adds to the table's struct tfs (at prefix)
// and records it and the ids it brings.
func (m *Merger) add(prefix string, tfs []iceberg.NestedField, ff iceberg.NestedField) error {
	path := prefix + ff.Name
	if ff.Required {
		return fmt.Errorf("iceberg: %s: file %s adds the required field %q; a table can only gain optional fields, so make it optional (or give it a default) in the schema", m.table, m.file, path)
	}
	for _, tf := range tfs {
		if tf.Name == ff.Name {
			return fmt.Errorf("iceberg: %s: file %s numbers field %q %d, but the table numbers it %d", m.table, m.file, path, ff.ID, tf.ID)
		}
	}
	if ownColumn(prefix, ff) {
		// Only the current schema can hold id 9 for a column of a file:
		// an older schema that gives it another path is the one a
		// catalog numbered afresh (1, 2, ...) when the table was made,
		// before package iceberg's adopt gave it the files' ids, and no
		// file was written with it.
		if other, ok := m.current[ff.ID]; ok {
			return fmt.Errorf("iceberg: %s: file %s adds the Kafka partition's column %q with id %d, which the table gives %q; write to a new table", m.table, m.file, path, ff.ID, other)
		}
		m.current[ff.ID], m.ids[ff.ID] = path, path
		m.own = true
		return nil
	}
	var err error
	walkIDs(prefix, []iceberg.NestedField{ff}, func(id int, p string) {
		if other, ok := m.ids[id]; ok && err == nil {
			err = fmt.Errorf("iceberg: %s: file %s adds the field %q with id %d, which the table gives %q: two paths whose ids collide; rename the new field", m.table, m.file, p, id, other)
		}
	})
	if err != nil {
		return err
	}
	walkIDs(prefix, []iceberg.NestedField{ff}, func(id int, p string) { m.ids[id] = p })
	if len(m.added) == 0 {
		m.addedBy = m.file
	}
	m.added = append(m.added, path)
	return nil
}

// typ merges the type of a file's field at path into the table's: the
// same type, or a struct (a list's element struct, a map's value struct)
// whose fields merge. Anything else is a change of the field's type.
func (m *Merger) typ(path string, tt, ft iceberg.Type) (iceberg.Type, error) {
	if tt.Equals(ft) {
		return tt, nil
	}
	changes := func() error {
		return fmt.Errorf("iceberg: %s: field %q changes type from %s in the table to %s in file %s: an incompatible schema change; write to a new table, or change the schema back", m.table, path, tt, ft, m.file)
	}
	switch tt := tt.(type) {
	case *iceberg.StructType:
		ft, ok := ft.(*iceberg.StructType)
		if !ok {
			return nil, changes()
		}
		fields, err := m.fields(path+".", tt.FieldList, ft.FieldList)
		if err != nil {
			return nil, err
		}
		return &iceberg.StructType{FieldList: fields}, nil
	case *iceberg.ListType:
		ft, ok := ft.(*iceberg.ListType)
		if !ok || ft.ElementID != tt.ElementID || (tt.ElementRequired && !ft.ElementRequired) {
			return nil, changes()
		}
		elem, err := m.typ(path+".element", tt.Element, ft.Element)
		if err != nil {
			return nil, err
		}
		return &iceberg.ListType{ElementID: tt.ElementID, Element: elem, ElementRequired: tt.ElementRequired}, nil
	case *iceberg.MapType:
		ft, ok := ft.(*iceberg.MapType)
		if !ok || ft.KeyID != tt.KeyID || !ft.KeyType.Equals(tt.KeyType) || ft.ValueID != tt.ValueID || (tt.ValueRequired && !ft.ValueRequired) {
			return nil, changes()
		}
		val, err := m.typ(path+".value", tt.ValueType, ft.ValueType)
		if err != nil {
			return nil, err
		}
		return &iceberg.MapType{KeyID: tt.KeyID, KeyType: tt.KeyType, ValueID: tt.ValueID, ValueType: val, ValueRequired: tt.ValueRequired}, nil
	}
	return nil, changes()
}

// walkIDs calls fn with the id and path of each field in fields (at
// prefix) and in their types, a list's element and a map's key and value
// included.
func walkIDs(prefix string, fields []iceberg.NestedField, fn func(id int, path string)) {
	for _, f := range fields {
		fn(f.ID, prefix+f.Name)
		walkType(prefix+f.Name, f.Type, fn)
	}
}

func walkType(path string, t iceberg.Type, fn func(id int, path string)) {
	switch t := t.(type) {
	case *iceberg.StructType:
		walkIDs(path+".", t.FieldList, fn)
	case *iceberg.ListType:
		fn(t.ElementID, path+".element")
		walkType(path+".element", t.Element, fn)
	case *iceberg.MapType:
		fn(t.KeyID, path+".key")
		walkType(path+".key", t.KeyType, fn)
		fn(t.ValueID, path+".value")
		walkType(path+".value", t.ValueType, fn)
	}
}
