package workqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// ReadOption narrows or tunes a cache read ([Client.Get], [Client.List] and
// their Object forms). Options that do not apply to a call are ignored.
type ReadOption func(*readConfig)

type readConfig struct {
	namespace      string
	labelSelector  string
	indexName      string
	indexValue     string
	minVersion     string
	wait           time.Duration
	includeDeleted bool
	pageSize       uint32
}

// InNamespace lists only objects in namespace (List).
func InNamespace(namespace string) ReadOption {
	return func(c *readConfig) { c.namespace = namespace }
}

// MatchingLabels lists only objects matching a Kubernetes label selector,
// e.g. "app=web,tier!=cache" (List).
func MatchingLabels(selector string) ReadOption {
	return func(c *readConfig) { c.labelSelector = selector }
}

// InIndex lists only objects found under value in one of the informer's
// indexes from the sidecar config, e.g. by owner UID (List).
func InIndex(name, value string) ReadOption {
	return func(c *readConfig) { c.indexName, c.indexValue = name, value }
}

// AtLeastVersion waits until the cache has seen this resourceVersion (the
// one the API server returned for the worker's own write) before reading:
// read-your-writes. Give it a [WithWait] too, or the read fails at once when
// the cache is behind.
func AtLeastVersion(resourceVersion string) ReadOption {
	return func(c *readConfig) { c.minVersion = resourceVersion }
}

// WithWait lets the read wait up to d for the informer's initial list and
// for [AtLeastVersion] (capped by the sidecar). Without it such reads fail
// at once: [ErrUnavailable] before the informer synced,
// [context.DeadlineExceeded] while the cache is behind the version.
func WithWait(d time.Duration) ReadOption {
	return func(c *readConfig) { c.wait = d }
}

// WithDeleted makes Get return the last known state of a deleted object
// (Object.Deleted is then true) while the cache remembers it (Get).
func WithDeleted() ReadOption {
	return func(c *readConfig) { c.includeDeleted = true }
}

// WithPageSize sets how many objects each List round trip reads (List
// reads every page either way).
func WithPageSize(n int) ReadOption {
	return func(c *readConfig) { c.pageSize = uint32(max(n, 0)) }
}

func newReadConfig(opts []ReadOption) readConfig {
	var cfg readConfig
	for _, opt := range opts {
		opt(&cfg)
	}
	return cfg
}

func (c readConfig) waitProto() *durationpb.Duration {
	if c.wait <= 0 {
		return nil
	}
	return durationpb.New(c.wait)
}

// GetObject reads one object of an informer's cache by namespace (empty for
// a cluster-scoped resource) and name. [ErrNotFound] when the cache does not
// hold it; [ErrUnknownInformer] when the sidecar has no such informer.
func (c *Client) GetObject(ctx context.Context, informer, namespace, name string, opts ...ReadOption) (*Object, error) {
	cfg := newReadConfig(opts)
	op := fmt.Sprintf("get %s from informer %q", objectName(namespace, name), informer)
	resp, err := c.cache.GetObject(ctx, &workqueuev1.GetObjectRequest{
		Informer:           informer,
		Namespace:          namespace,
		Name:               name,
		MinResourceVersion: cfg.minVersion,
		Wait:               cfg.waitProto(),
		IncludeDeleted:     cfg.includeDeleted,
	})
	if err != nil {
		return nil, wrap(cacheService, op, err)
	}
	if resp.GetObject() == nil {
		return nil, fmt.Errorf("workqueue: %s: %w", op, ErrNotFound)
	}
	return objectFromProto(resp.GetObject()), nil
}

// Get reads one object from an informer's cache and decodes its JSON into
// into: a pointer to the resource's Go type, or to a map[string]any. Errors
// as [Client.GetObject].
func (c *Client) Get(ctx context.Context, informer, namespace, name string, into any, opts ...ReadOption) error {
	obj, err := c.GetObject(ctx, informer, namespace, name, opts...)
	if err != nil {
		return err
	}
	if err := obj.Decode(into); err != nil {
		return fmt.Errorf("workqueue: decoding %s from informer %q: %w", objectName(namespace, name), informer, err)
	}
	return nil
}

// ListObjects reads every object of an informer's cache that matches the
// options, in namespace/name order, following pages. Pages come from the
// live cache, not a snapshot.
func (c *Client) ListObjects(ctx context.Context, informer string, opts ...ReadOption) ([]*Object, error) {
	cfg := newReadConfig(opts)
	op := fmt.Sprintf("list informer %q", informer)
	var out []*Object
	token := ""
	for {
		resp, err := c.cache.ListObjects(ctx, &workqueuev1.ListObjectsRequest{
			Informer:           informer,
			Namespace:          cfg.namespace,
			LabelSelector:      cfg.labelSelector,
			IndexName:          cfg.indexName,
			IndexValue:         cfg.indexValue,
			MinResourceVersion: cfg.minVersion,
			Wait:               cfg.waitProto(),
			PageSize:           cfg.pageSize,
			PageToken:          token,
		})
		if err != nil {
			return nil, wrap(cacheService, op, err)
		}
		for _, o := range resp.GetObjects() {
			out = append(out, objectFromProto(o))
		}
		token = resp.GetNextPageToken()
		if token == "" {
			return out, nil
		}
	}
}

// List reads every matching object (as [Client.ListObjects]) and decodes
// them into into, a pointer to a slice: *[]MyType, *[]map[string]any or
// *[]json.RawMessage.
func (c *Client) List(ctx context.Context, informer string, into any, opts ...ReadOption) error {
	objs, err := c.ListObjects(ctx, informer, opts...)
	if err != nil {
		return err
	}
	// One JSON array of the raw objects, decoded once: any slice type
	// encoding/json can fill works, without reflection here.
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, o := range objs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(o.JSON)
	}
	buf.WriteByte(']')
	if err := json.Unmarshal(buf.Bytes(), into); err != nil {
		return fmt.Errorf("workqueue: decoding the list of informer %q: %w", informer, err)
	}
	return nil
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
