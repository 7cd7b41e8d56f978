// Package tablepath lays out an Iceberg table's files in Spillway's
// storage: the table's default location, where it lies under storage.url
// and storage.prefix, the abfs:// name of an Azure container, and the file
// name template of the table's data files, with one Hive-style folder per
// transform of iceberg.partition_by. Package naming parses the templates
// it writes; partvalue computes the values in them.
package tablepath

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/spillway/spillway/internal/naming/partvalue"
)

// With iceberg.table set, data files are written inside the table's
// location, as Iceberg's own writers lay them out:
//
//	<location>/data/<partition path>/<file.name_template>.parquet
//
// where the partition path has one Hive-style "name=value" segment per
// transform of iceberg.partition_by, in its order, so that each file holds
// one partition value (PartitionPath). The table's location is the
// SQL and Glue catalogs' default, <warehouse>/<namespace>.db/<table>
// (iceberg-go's catalog code uses the same), and it must lie under
// storage.url and storage.prefix, where Spillway writes (Template).

// icebergTransforms are the partition_by transforms the layout renders: the
// path segment of each, as Iceberg names a transform's partition field
// (source_transform; identity keeps the source's name) and writes its
// value (day: yyyy-MM-dd, hour: yyyy-MM-dd-HH, UTC).
var icebergTransforms = map[string]string{
	"partition":        "partition={{partition}}",
	"year(timestamp)":  "timestamp_year={{timestamp:unit=yyyy}}",
	"month(timestamp)": "timestamp_month={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}",
	"day(timestamp)":   "timestamp_day={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}",
	"hour(timestamp)":  "timestamp_hour={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}-{{timestamp:unit=HH}}",
}

// bucketKey is bucket(N,key) in canonical form (see
// partvalue.CanonTransform): the bucket of the record key among N,
// Iceberg's partition field key_bucket.
var bucketKey = regexp.MustCompile(`^bucket\(([1-9][0-9]{0,9}),key\)$`)

// Transforms lists the transforms PartitionPath takes, for messages.
func Transforms() []string {
	return []string{"partition", "year(timestamp)", "month(timestamp)", "day(timestamp)", "hour(timestamp)", "bucket(N,key)"}
}

// icebergSegment is the path segment of transform t, canonical.
func icebergSegment(t string) (string, bool) {
	if seg, ok := icebergTransforms[t]; ok {
		return seg, true
	}
	if m := bucketKey.FindStringSubmatch(t); m != nil {
		return "key_bucket={{key_bucket:n=" + m[1] + "}}", true
	}
	if vt, ok := partvalue.ParseValueTransform(t); ok {
		return valueSegment(vt), true
	}
	return "", false
}

// PartitionPath is the template of the partition path of
// partitionBy's transforms (canonical, see partvalue.CanonTransform), ""
// for an unpartitioned table. A transform it can't render, or one given
// twice, is an error naming it.
func PartitionPath(partitionBy []string) (string, error) {
	var segs []string
	seen := map[string]bool{}
	for _, t := range partitionBy {
		seg, ok := icebergSegment(t)
		if !ok {
			return "", fmt.Errorf("transform %q can't be laid out; use %s, or a field of the registry-typed value: country, identity(country), bucket(16,user_id), truncate(4,name), year|month|day|hour(created_at)", t, strings.Join(Transforms(), ", "))
		}
		field, _, _ := strings.Cut(seg, "=")
		if seen[field] {
			return "", fmt.Errorf("transform %q is listed twice (Iceberg's partition field %s)", t, field)
		}
		seen[field] = true
		segs = append(segs, seg)
	}
	return strings.Join(segs, "/"), nil
}

// UsesTime reports whether partitionBy partitions by the record timestamp.
func UsesTime(partitionBy []string) bool {
	for _, t := range partitionBy {
		if strings.HasSuffix(t, "(timestamp)") {
			return true
		}
	}
	return false
}

// UsesKeyBucket reports whether partitionBy (canonical) buckets the key.
func UsesKeyBucket(partitionBy []string) bool {
	for _, t := range partitionBy {
		if bucketKey.MatchString(t) {
			return true
		}
	}
	return false
}

// Location is the default location of table name in namespace ns
// under warehouse: <warehouse>/<ns>.db/<name>, as iceberg-go's SQL
// catalog (and Glue's) computes it when the namespace sets none.
func Location(warehouse, ns, name string) string {
	return strings.TrimSuffix(warehouse, "/") + "/" + ns + ".db/" + name
}

// LocationUnder returns location relative to storage.url plus
// storage.prefix (storageURL, prefix), or an error when files written
// there would land outside it: another scheme, bucket or host, or a path
// outside the prefix. The query of a URL (s3's region) is ignored.
func LocationUnder(storageURL, prefix, location string) (string, error) {
	su, err := url.Parse(storageURL)
	if err != nil {
		return "", fmt.Errorf("storage.url does not parse: %w", err)
	}
	lu, err := url.Parse(location)
	if err != nil {
		return "", fmt.Errorf("the table location %q does not parse as a URL: %w", location, err)
	}
	// The user part is an abfs:// location's container (see
	// AzureBase).
	if su.Scheme != lu.Scheme || su.Host != lu.Host || su.User.String() != lu.User.String() {
		return "", fmt.Errorf("the table location %s is not in storage.url's %s", location, root(su))
	}
	base := strings.TrimSuffix(su.Path, "/") + "/" + prefix
	loc := path.Clean("/" + lu.Path)
	if !strings.HasSuffix(base, "/") {
		return "", fmt.Errorf("storage.prefix %q must end with \"/\" (or be empty) for a table: the table's location is a folder under it", prefix)
	}
	rel, ok := strings.CutPrefix(loc+"/", path.Clean(base)+"/")
	if base == "/" {
		rel, ok = strings.TrimPrefix(loc, "/")+"/", true
	}
	rel = strings.TrimSuffix(rel, "/")
	if !ok || rel == "" {
		return "", fmt.Errorf("the table location %s is not inside storage.url and storage.prefix (%s%s), where Spillway writes its files", location, root(su), base)
	}
	return rel, nil
}

// root is u's scheme, user (an abfs:// container) and host.
func root(u *url.URL) string {
	if u.User != nil {
		return u.Scheme + "://" + u.User.String() + "@" + u.Host
	}
	return u.Scheme + "://" + u.Host
}

// Template is the effective file name template of a table's files:
// rel (the table's location under storage.prefix, see LocationUnder),
// "data", the partition path (see PartitionPath) and template. It
// is idempotent: a template that already starts with the table's data
// folder is returned as it is, so that a config rendered with it loads
// back the same.
//
// A {{topic}} in rel (iceberg.table kafka.{{topic}}) becomes
// {{topic:dots=_}}: the folder is the table's name, and a topic's dots
// are "_" in it (naming.TableTopic), so that the files of topic orders.v1
// lie in the location of table kafka.orders_v1,
// <warehouse>/kafka.db/orders_v1.
func Template(rel, partitionPath, template string) string {
	dir := strings.ReplaceAll(rel, "{{topic}}", "{{topic:dots=_}}") + "/data/"
	if partitionPath != "" {
		dir += partitionPath + "/"
	}
	if strings.HasPrefix(template, dir) {
		return template
	}
	return dir + template
}

// valueSegment is vt's path segment: "<field name>={{value_field:...}}".
func valueSegment(vt partvalue.ValueTransform) string {
	param := ""
	switch vt.Transform {
	case "identity":
	case "bucket", "truncate":
		param = "," + vt.Transform + "=" + strconv.Itoa(vt.N)
	default:
		param = "," + vt.Transform
	}
	return vt.FieldName() + "={{value_field:path=" + vt.Path + param + "}}"
}
