package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// stored is one resource as the scenario set it, decoded into its Envoy message.
type stored struct {
	msg types.Resource
	ttl *time.Duration
}

// store is what the scenario has published so far: type -> name -> resource, the types
// published (even if empty) and one version per type, advanced when a publication
// touches the type.
type store struct {
	resources    map[string]map[string]stored
	published    map[string]bool
	typeVersions map[string]uint64
	// removed holds the names each type lost in the last publication (LinearCache
	// deletes by name).
	removed map[string][]string
	// updated holds the names each type gained or changed in the last publication.
	updated map[string][]string
}

func newStore() *store {
	return &store{
		resources:    map[string]map[string]stored{},
		published:    map[string]bool{},
		typeVersions: map[string]uint64{},
	}
}

// apply changes the store by one publication's operations; it answers the types touched.
// A publication that fails leaves the store as it was.
func (s *store) apply(ops []op) (map[string]bool, error) {
	touched := map[string]bool{}
	updates := map[string]map[string]stored{}
	removes := map[string]map[string]bool{}
	for _, o := range ops {
		switch o.Op {
		case "set":
			if len(o.Aliases) > 0 {
				return nil, errors.New("go-control-plane's caches have no aliases")
			}
			body, err := base64.StdEncoding.DecodeString(o.Body)
			if err != nil {
				return nil, fmt.Errorf("body: %w", err)
			}
			msg, err := decode(o.TypeURL, o.Name, body)
			if err != nil {
				return nil, err
			}
			r := stored{msg: msg}
			if o.TTLMs != nil {
				ttl := time.Duration(*o.TTLMs) * time.Millisecond
				r.ttl = &ttl
			}
			if updates[o.TypeURL] == nil {
				updates[o.TypeURL] = map[string]stored{}
			}
			updates[o.TypeURL][o.Name] = r
			delete(removes[o.TypeURL], o.Name)
		case "remove":
			if removes[o.TypeURL] == nil {
				removes[o.TypeURL] = map[string]bool{}
			}
			removes[o.TypeURL][o.Name] = true
			delete(updates[o.TypeURL], o.Name)
		case "publish":
		default:
			return nil, fmt.Errorf("unknown op %q", o.Op)
		}
		if !served(o.TypeURL) {
			return nil, fmt.Errorf("go-control-plane does not serve %s", o.TypeURL)
		}
		touched[o.TypeURL] = true
	}
	s.updated = map[string][]string{}
	s.removed = map[string][]string{}
	for typeURL, of := range updates {
		if s.resources[typeURL] == nil {
			s.resources[typeURL] = map[string]stored{}
		}
		for name, r := range of {
			s.resources[typeURL][name] = r
			s.updated[typeURL] = append(s.updated[typeURL], name)
		}
	}
	for typeURL, names := range removes {
		for name := range names {
			delete(s.resources[typeURL], name)
			s.removed[typeURL] = append(s.removed[typeURL], name)
		}
	}
	for typeURL := range touched {
		s.published[typeURL] = true
		s.typeVersions[typeURL]++
	}
	return touched, nil
}
