package config

import (
	"fmt"

	"github.com/spillway/spillway/internal/naming"
)

// checkStateDir refuses a file.name_template that writes files into
// storage.prefix's state directory (naming.StateDir, the resume ledger's):
// for every topic, or for a topic of kafka.topics. A topic that
// kafka.topic_regex matches is checked when it is assigned (CheckTopic).
func (c *Config) checkStateDir(ps *problems) {
	t, ext, ok := c.stateDirTemplate()
	if !ok {
		return
	}
	if t.InStateDir("", ext) {
		ps.add("file.name_template", c.File.NameTemplate, "writes files into %q under storage.prefix, the folder of Spillway's resume ledger; %s",
			naming.StateDir+"/", stateDirFix(c.File.NameTemplate))
		return
	}
	for _, topic := range c.Kafka.Topics {
		if topicName.MatchString(topic) && t.InStateDir(topic, ext) {
			ps.add("kafka.topics", topic, "is a topic whose files %s", stateDirMsg(c.File.NameTemplate))
		}
	}
}

// CheckTopic refuses, as an *Error, a topic whose files file.name_template
// would write into storage.prefix's state directory: the consumer asks it
// of every topic assigned, since kafka.topic_regex can match one that
// Validate couldn't know of.
func (c *Config) CheckTopic(topic string) error {
	t, ext, ok := c.stateDirTemplate()
	if !ok || !t.InStateDir(topic, ext) {
		return nil
	}
	p := Problem{Key: "kafka.topics", Value: topic, Msg: "is a topic whose files " + stateDirMsg(c.File.NameTemplate)}
	if c.Kafka.TopicRegex != "" {
		p = Problem{Key: "kafka.topic_regex", Value: c.Kafka.TopicRegex, Msg: fmt.Sprintf("matches topic %q, whose files %s, or leave the topic out of kafka.topic_regex",
			topic, stateDirMsg(c.File.NameTemplate))}
	}
	return &Error{Problems: []Problem{p}}
}

// stateDirTemplate is the template and extension InStateDir needs; ok is
// false when the template doesn't parse (reported by File.check).
func (c *Config) stateDirTemplate() (t *naming.Template, ext string, ok bool) {
	t, err := naming.Parse(c.File.NameTemplate)
	if err != nil {
		return nil, "", false
	}
	// An extension (auto's, or one set by hand) starts with '.', which
	// naming.StateDir doesn't hold: only whether there is one matters.
	if c.File.Extension != "" {
		ext = "."
	}
	return t, ext, true
}

func stateDirMsg(template string) string {
	return fmt.Sprintf("file.name_template %q would write into %q under storage.prefix, the folder of Spillway's resume ledger; %s",
		template, naming.StateDir+"/", stateDirFix(template))
}

func stateDirFix(template string) string {
	return fmt.Sprintf("start the template with a folder of your own, such as file.name_template: %q", "topics/"+template)
}
