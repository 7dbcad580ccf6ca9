package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"workqueue-sidecar/bench/remote-go/internal/stamps"
)

// creator writes the run's ConfigMaps from several goroutines at once, with
// its own client, identical in both modes.
type creator struct {
	client    kubernetes.Interface
	namespace string
	parallel  int
}

func newCreator(config *rest.Config, namespace string, parallel int) (*creator, error) {
	config = rest.CopyConfig(config)
	// A negative QPS turns client-go's client-side rate limiter off: the
	// creation rate is then the API server's, the ceiling both sides share.
	config.QPS, config.Burst = -1, 0
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &creator{client: client, namespace: namespace, parallel: max(parallel, 1)}, nil
}

func (c *creator) configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "remote"}},
		Data:       map[string]string{"name": name},
	}
}

// probe creates one object and waits until the reconciler has seen it: the
// proof that the side is live end to end (watch, queue, workers), whatever
// "started" means for it. It also warms the creator's connection.
func (c *creator) probe(ctx context.Context, name string, seen <-chan struct{}, timeout time.Duration) error {
	if _, err := c.client.CoreV1().ConfigMaps(c.namespace).Create(ctx, c.configMap(name), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the probe: %w", err)
	}
	select {
	case <-seen:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("the probe %s/%s was not reconciled within %s", c.namespace, name, timeout)
	}
}

// create makes objects 0..n-1, recording when each Create returned.
func (c *creator) create(ctx context.Context, n int, rec *recorder) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	rec.startCreating()
	for range c.parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				rec.createSent(i)
				_, err := c.client.CoreV1().ConfigMaps(c.namespace).Create(ctx, c.configMap(stamps.ObjectName(i)), metav1.CreateOptions{})
				if err != nil {
					cancel(fmt.Errorf("create %s/%s: %w", c.namespace, stamps.ObjectName(i), err))
					return
				}
				rec.createReturned(i)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}
