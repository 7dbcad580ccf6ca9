package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// readStream reads the streaming list an informer of the namespace's
// ConfigMaps asks for, as JSON, and decodes nothing: it only splits the
// events' lines until the initial-events-end bookmark. Its time is what the
// API server takes to send the list, plus TLS and gzip (client-go's transport
// asks for gzip), the floor under any JSON reader's sync time. It prints the
// same "synced" line as sync.
func readStream(client *kubernetes.Clientset, namespace string, start time.Time) {
	sendInitialEvents := true
	options := metav1.ListOptions{
		Watch:                true,
		SendInitialEvents:    &sendInitialEvents,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	}
	stream, err := client.CoreV1().RESTClient().Get().Namespace(namespace).Resource("configmaps").
		VersionedParams(&options, metav1.ParameterCodec).SetHeader("Accept", "application/json").
		Stream(context.Background())
	if err != nil {
		fail(err)
	}
	lines := bufio.NewScanner(stream)
	lines.Buffer(make([]byte, 1<<20), 64<<20)
	objects := 0
	for lines.Scan() {
		if bytes.Contains(lines.Bytes(), []byte(`"k8s.io/initial-events-end"`)) {
			now := time.Now()
			fmt.Printf("synced objects=%d seconds=%.3f unix_us=%d\n", objects, now.Sub(start).Seconds(), now.UnixMicro())
			select {}
		}
		objects++
	}
	fail(fmt.Errorf("the stream ended before its initial-events-end bookmark: %v", lines.Err()))
}
