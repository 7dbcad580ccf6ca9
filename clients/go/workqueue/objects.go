package workqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// Objects writes Kubernetes objects through the sidecar (its
// ObjectService): server-side apply, patch, create and delete of any kind,
// with the sidecar's credentials, so a worker needs no Kubernetes client
// library. Get one from [Client.Objects], or from [Request.Objects] inside a
// reconcile: writes made that way name the request's lease, so the sidecar
// makes them only while the lease is current ([ErrStaleLease] otherwise)
// and does not hand the key out again until its caches have seen them (the
// next reconcile never reads a cache older than its own last write).
//
// Objects are Go values marshalled with encoding/json (a struct of your
// own, a k8s.io/api type, a map[string]any), or JSON as-is ([]byte or
// json.RawMessage). An Objects is cheap and safe for concurrent use.
type Objects struct {
	client *Client
	lease  *workqueuev1.LeaseRef // nil: writes name no lease
}

// Objects writes objects without naming a lease. Inside a reconcile prefer
// [Request.Objects], or pass [UnderLease].
func (c *Client) Objects() *Objects {
	return &Objects{client: c}
}

// ObjectRef names one object: its kind (apiVersion and kind, e.g. "v1"
// "ConfigMap", "apps/v1" "Deployment") and where it is. Namespace is empty
// for a cluster-scoped object.
type ObjectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

func (r ObjectRef) String() string {
	return fmt.Sprintf("%s %s", r.Kind, objectName(r.Namespace, r.Name))
}

func (r ObjectRef) resourceType() *workqueuev1.ResourceType {
	return &workqueuev1.ResourceType{ApiVersion: r.APIVersion, Kind: r.Kind}
}

// Written is an object as the API server returned it after a write.
type Written struct {
	// ResourceVersion is metadata.resourceVersion: pass it to a cache read
	// with [AtLeastVersion] to read this write back from the cache.
	ResourceVersion string
	// UID is metadata.uid.
	UID string
	// JSON is the whole object as the API server returned it.
	JSON json.RawMessage
}

// Decode unmarshals the written object's JSON into v: a pointer to the
// resource's Go type, or to a map[string]any.
func (w *Written) Decode(v any) error {
	return json.Unmarshal(w.JSON, v)
}

func writtenFromProto(o *workqueuev1.WrittenObject) *Written {
	if o == nil {
		return nil
	}
	return &Written{ResourceVersion: o.GetResourceVersion(), UID: o.GetUid(), JSON: json.RawMessage(o.GetJson())}
}

// Deletion is what [Objects.Delete] did.
type Deletion struct {
	// Gone is true when the object was removed at once; false when it still
	// exists, marked for deletion, because finalizers (or foreground
	// propagation) hold it.
	Gone bool
	// Object is the object marked for deletion (with its
	// deletionTimestamp); nil when Gone.
	Object *Written
}

// Propagation says what happens to the objects a deleted object owns.
type Propagation int32

// The propagation policies of a delete (the proto's Propagation).
const (
	// PropagationDefault is the resource's default (for most, background).
	PropagationDefault    Propagation = Propagation(workqueuev1.Propagation_PROPAGATION_UNSPECIFIED)
	PropagationBackground Propagation = Propagation(workqueuev1.Propagation_PROPAGATION_BACKGROUND)
	PropagationForeground Propagation = Propagation(workqueuev1.Propagation_PROPAGATION_FOREGROUND)
	PropagationOrphan     Propagation = Propagation(workqueuev1.Propagation_PROPAGATION_ORPHAN)
)

// WriteOption tunes a write. Options that do not apply to a call are
// ignored.
type WriteOption func(*writeConfig)

type writeConfig struct {
	fieldManager string
	force        bool
	status       bool
	preUID       string
	preVersion   string
	propagation  Propagation
	lease        *workqueuev1.LeaseRef
}

// WithFieldManager records the write under this field manager instead of
// the sidecar's (its config's field_manager) (Apply, Patch, Create).
func WithFieldManager(name string) WriteOption {
	return func(c *writeConfig) { c.fieldManager = name }
}

// ForceConflicts makes an apply take fields another manager owns instead of
// failing with [ErrConflict] (Apply), as kubectl's --force-conflicts.
func ForceConflicts() WriteOption {
	return func(c *writeConfig) { c.force = true }
}

// ToStatus patches the status subresource instead of the object (Patch).
func ToStatus() WriteOption {
	return func(c *writeConfig) { c.status = true }
}

// IfUID deletes only if the object still has this UID, i.e. it was not
// deleted and recreated meanwhile; [ErrConflict] otherwise (Delete).
func IfUID(uid string) WriteOption {
	return func(c *writeConfig) { c.preUID = uid }
}

// IfResourceVersion deletes only if the object is still at this
// resourceVersion; [ErrConflict] otherwise (Delete).
func IfResourceVersion(resourceVersion string) WriteOption {
	return func(c *writeConfig) { c.preVersion = resourceVersion }
}

// WithPropagation says what becomes of the objects the deleted one owns
// (Delete).
func WithPropagation(p Propagation) WriteOption {
	return func(c *writeConfig) { c.propagation = p }
}

// UnderLease makes the write under req's lease, as [Request.Objects] does:
// made only while the lease is current ([ErrStaleLease] otherwise), and the
// key is not leased again until the sidecar's caches have seen it. For
// writes through [Client.Objects] from code that has the Request at hand.
func UnderLease(req Request) WriteOption {
	return func(c *writeConfig) { c.lease = req.leaseRef() }
}

// errNoClient: Objects of a Request that did not come from the sidecar (a
// Request built by hand, say in a unit test).
var errNoClient = errors.New("workqueue: this Request did not come from a sidecar, so it cannot write: use Client.Objects")

func (o *Objects) config(opts []WriteOption) writeConfig {
	cfg := writeConfig{lease: o.lease}
	for _, opt := range opts {
		opt(&cfg)
	}
	return cfg
}

// Apply server-side applies obj: the fields it sets become owned by the
// field manager, others' fields are left alone. obj must carry apiVersion,
// kind, metadata.name (and metadata.namespace for a namespaced kind); a
// field another manager owns fails with [ErrConflict] unless
// [ForceConflicts].
func (o *Objects) Apply(ctx context.Context, obj any, opts ...WriteOption) (*Written, error) {
	if o.client == nil {
		return nil, errNoClient
	}
	body, ref, err := encodeObject(obj)
	if err != nil {
		return nil, fmt.Errorf("workqueue: apply: %w", err)
	}
	op := "apply " + ref.String()
	if ref.Name == "" {
		return nil, fmt.Errorf("workqueue: %s: %w: metadata.name is required", op, ErrInvalidArgument)
	}
	cfg := o.config(opts)
	resp, err := o.client.objects.ApplyObject(ctx, &workqueuev1.ApplyObjectRequest{
		Type:         ref.resourceType(),
		Namespace:    ref.Namespace,
		Name:         ref.Name,
		Json:         body,
		FieldManager: cfg.fieldManager,
		Force:        cfg.force,
		Lease:        cfg.lease,
	})
	if err != nil {
		return nil, wrap(objectService, op, err)
	}
	return writtenFromProto(resp.GetObject()), nil
}

// Create creates obj, which carries apiVersion, kind and metadata (a name
// or a generateName, and a namespace for a namespaced kind). An object of
// that name that exists already fails with [ErrAlreadyExists] (which is
// also an [ErrConflict]).
func (o *Objects) Create(ctx context.Context, obj any, opts ...WriteOption) (*Written, error) {
	if o.client == nil {
		return nil, errNoClient
	}
	body, ref, err := encodeObject(obj)
	if err != nil {
		return nil, fmt.Errorf("workqueue: create: %w", err)
	}
	op := "create " + ref.String()
	cfg := o.config(opts)
	resp, err := o.client.objects.CreateObject(ctx, &workqueuev1.CreateObjectRequest{
		Type:         ref.resourceType(),
		Namespace:    ref.Namespace,
		Json:         body,
		FieldManager: cfg.fieldManager,
		Lease:        cfg.lease,
	})
	if err != nil {
		return nil, wrap(objectService, op, err)
	}
	return writtenFromProto(resp.GetObject()), nil
}

// Patch patches the object ref names (its status with [ToStatus]). patch
// is a JSON merge patch when it encodes to a JSON object (fields replace
// the object's, null deletes one: map[string]any{"metadata":
// map[string]any{"labels": map[string]any{"team": nil}}}), and a JSON patch
// when it encodes to an array of operations ([]map[string]any{{"op":
// "test", "path": "/metadata/resourceVersion", "value": rv}, ...}).
func (o *Objects) Patch(ctx context.Context, ref ObjectRef, patch any, opts ...WriteOption) (*Written, error) {
	if o.client == nil {
		return nil, errNoClient
	}
	op := "patch " + ref.String()
	body, err := encodeJSON(patch)
	if err != nil {
		return nil, fmt.Errorf("workqueue: %s: %w", op, err)
	}
	var patchType workqueuev1.PatchType
	switch firstByte(body) {
	case '{':
		patchType = workqueuev1.PatchType_PATCH_TYPE_MERGE
	case '[':
		patchType = workqueuev1.PatchType_PATCH_TYPE_JSON
	default:
		return nil, fmt.Errorf("workqueue: %s: %w: a patch is a JSON object (merge patch) or array (JSON patch)", op, ErrInvalidArgument)
	}
	cfg := o.config(opts)
	resp, err := o.client.objects.PatchObject(ctx, &workqueuev1.PatchObjectRequest{
		Type:         ref.resourceType(),
		Namespace:    ref.Namespace,
		Name:         ref.Name,
		PatchType:    patchType,
		Patch:        body,
		Status:       cfg.status,
		FieldManager: cfg.fieldManager,
		Lease:        cfg.lease,
	})
	if err != nil {
		return nil, wrap(objectService, op, err)
	}
	return writtenFromProto(resp.GetObject()), nil
}

// Delete deletes the object ref names, with [IfUID], [IfResourceVersion]
// and [WithPropagation]. An object that does not exist fails with
// [ErrNotFound]; the Deletion says whether it is gone or only marked for
// deletion (held by finalizers).
func (o *Objects) Delete(ctx context.Context, ref ObjectRef, opts ...WriteOption) (Deletion, error) {
	if o.client == nil {
		return Deletion{}, errNoClient
	}
	op := "delete " + ref.String()
	cfg := o.config(opts)
	resp, err := o.client.objects.DeleteObject(ctx, &workqueuev1.DeleteObjectRequest{
		Type:                        ref.resourceType(),
		Namespace:                   ref.Namespace,
		Name:                        ref.Name,
		PreconditionUid:             cfg.preUID,
		PreconditionResourceVersion: cfg.preVersion,
		Propagation:                 workqueuev1.Propagation(cfg.propagation),
		Lease:                       cfg.lease,
	})
	if err != nil {
		return Deletion{}, wrap(objectService, op, err)
	}
	return Deletion{Gone: resp.GetGone(), Object: writtenFromProto(resp.GetObject())}, nil
}

// objectHead is the part of an object a write needs to name it.
type objectHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name         string `json:"name"`
		GenerateName string `json:"generateName"`
		Namespace    string `json:"namespace"`
		UID          string `json:"uid"`
	} `json:"metadata"`
}

// encodeObject marshals obj and reads its apiVersion, kind, namespace and
// name, which the sidecar's request carries beside the JSON.
func encodeObject(obj any) ([]byte, ObjectRef, error) {
	body, err := encodeJSON(obj)
	if err != nil {
		return nil, ObjectRef{}, err
	}
	var head objectHead
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, ObjectRef{}, fmt.Errorf("%w: the object is not a JSON object: %v", ErrInvalidArgument, err)
	}
	ref := ObjectRef{APIVersion: head.APIVersion, Kind: head.Kind, Namespace: head.Metadata.Namespace, Name: head.Metadata.Name}
	if ref.APIVersion == "" || ref.Kind == "" {
		return nil, ref, fmt.Errorf("%w: the object has no apiVersion or kind", ErrInvalidArgument)
	}
	return body, ref, nil
}

// encodeJSON marshals v, passing JSON given as []byte or json.RawMessage
// through unchanged (encoding/json would write a []byte as base64).
func encodeJSON(v any) ([]byte, error) {
	var raw []byte
	switch v := v.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case nil:
		return nil, fmt.Errorf("%w: nil object", ErrInvalidArgument)
	}
	if raw != nil {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%w: not valid JSON", ErrInvalidArgument)
		}
		return raw, nil
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return body, nil
}

func firstByte(body []byte) byte {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return 0
	}
	return trimmed[0]
}

// OwnerReference is one entry of metadata.ownerReferences, with the JSON
// names the API server uses.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// ErrNoObject: [ControllerRef] was given no object (a Request run without
// [WithObject], or a deleted one).
var ErrNoObject = errors.New("no object to own")

// ControllerRef builds the controller ownerReference a child object carries
// to say that owner (e.g. a Request's Object, from [WithObject]) controls
// it: the owner's apiVersion, kind, name and uid, with controller and
// blockOwnerDeletion true. Put it in the child's metadata.ownerReferences;
// the garbage collector then deletes the child with its owner.
func ControllerRef(owner *Object) (OwnerReference, error) {
	if owner == nil || len(owner.JSON) == 0 {
		return OwnerReference{}, fmt.Errorf("workqueue: controller reference: %w", ErrNoObject)
	}
	var head objectHead
	if err := json.Unmarshal(owner.JSON, &head); err != nil {
		return OwnerReference{}, fmt.Errorf("workqueue: controller reference of %s: %w", objectName(owner.Namespace, owner.Name), err)
	}
	if head.APIVersion == "" || head.Kind == "" || head.Metadata.Name == "" || head.Metadata.UID == "" {
		return OwnerReference{}, fmt.Errorf("workqueue: controller reference of %s: the object lacks apiVersion, kind, name or uid", objectName(owner.Namespace, owner.Name))
	}
	yes := true
	return OwnerReference{
		APIVersion:         head.APIVersion,
		Kind:               head.Kind,
		Name:               head.Metadata.Name,
		UID:                head.Metadata.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}, nil
}
