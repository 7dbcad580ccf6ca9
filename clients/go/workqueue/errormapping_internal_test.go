package workqueue

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// mappedRefusal is one line of clients/error-mapping.tsv, the table every
// client's tests share: a status the sidecar answers, and the sentinels this
// client's error for it matches (the other clients' columns are theirs).
type mappedRefusal struct {
	line           int
	service        string
	code           codes.Code
	domain, reason string
	goSentinels    string
}

// readErrorMapping parses the shared table; a malformed line fails the test.
func readErrorMapping(t *testing.T) []mappedRefusal {
	t.Helper()
	file, err := os.Open("../../error-mapping.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var rows []mappedRefusal
	scanner := bufio.NewScanner(file)
	for n := 1; scanner.Scan(); n++ {
		text := scanner.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Split(text, "\t")
		if len(f) != 8 {
			t.Fatalf("error-mapping.tsv:%d: %d fields, want 8", n, len(f))
		}
		var code codes.Code
		if err := code.UnmarshalJSON([]byte(`"` + f[1] + `"`)); err != nil {
			t.Fatalf("error-mapping.tsv:%d: %v", n, err)
		}
		rows = append(rows, mappedRefusal{n, f[0], code, f[2], f[3], f[4]})
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("error-mapping.tsv has no lines")
	}
	return rows
}

// sentinelsByName are every sentinel a call's error may match.
var sentinelsByName = map[string]error{
	"ErrUnknownQueue": ErrUnknownQueue, "ErrUnknownInformer": ErrUnknownInformer, "ErrStaleLease": ErrStaleLease,
	"ErrNoKubernetes": ErrNoKubernetes, "ErrUnknownKind": ErrUnknownKind, "ErrConflict": ErrConflict,
	"ErrAlreadyExists": ErrAlreadyExists, "ErrLeaseEndedDuringWrite": ErrLeaseEndedDuringWrite,
	"ErrForbidden": ErrForbidden, "ErrUnavailable": ErrUnavailable, "ErrInvalidArgument": ErrInvalidArgument,
	"ErrOverLimit": ErrOverLimit, "ErrNotFound": ErrNotFound, "ErrNoKey": ErrNoKey,
	"context.DeadlineExceeded": context.DeadlineExceeded, "context.Canceled": context.Canceled,
	"errors.ErrUnsupported": errors.ErrUnsupported,
}

func TestEveryRefusalShouldMatchTheSentinelsTheSharedTableGives(t *testing.T) {
	services := map[string]service{"queue": queueService, "cache": cacheService, "object": objectService}
	for _, row := range readErrorMapping(t) {
		svc, ok := services[row.service]
		if !ok {
			t.Fatalf("error-mapping.tsv:%d: unknown service %q", row.line, row.service)
		}
		st := status.New(row.code, "refused")
		if row.domain != "-" {
			info := &errdetails.ErrorInfo{Domain: row.domain, Reason: row.reason}
			if row.domain == kubernetesErrorDomain {
				info.Metadata = map[string]string{"http_status": "400"}
			}
			var err error
			if st, err = st.WithDetails(info); err != nil {
				t.Fatal(err)
			}
		}
		err := wrap(svc, "call", st.Err())
		want := map[string]bool{}
		for _, name := range strings.Split(row.goSentinels, "+") {
			if _, known := sentinelsByName[name]; !known {
				t.Fatalf("error-mapping.tsv:%d: unknown sentinel %q", row.line, name)
			}
			want[name] = true
		}
		for name, sentinel := range sentinelsByName {
			if got := errors.Is(err, sentinel); got != want[name] {
				t.Errorf("error-mapping.tsv:%d (%s %s %s): errors.Is(err, %s) = %v, want %v",
					row.line, row.service, row.code, row.reason, name, got, want[name])
			}
		}
		if status.Code(err) != row.code {
			t.Errorf("error-mapping.tsv:%d: code %s, want %s", row.line, status.Code(err), row.code)
		}
	}
}
