package workqueue_test

// WithTLS against the real sidecar serving TLS, and mTLS, on certificates
// made for each test.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// authority is a CA that signs certificates for a test.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newAuthority(t *testing.T, name string) authority {
	t.Helper()
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	cert, key, _ := sign(t, template, nil, nil)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return authority{cert: cert, key: key, pool: pool}
}

// sign makes a key and a certificate for template, signed by parent (self-signed when nil).
func sign(t *testing.T, template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template.SerialNumber = big.NewInt(time.Now().UnixNano())
	template.NotBefore, template.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, der
}

// issue signs a leaf certificate for usage; the server's names 127.0.0.1 and localhost.
func (a authority) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	template := &x509.Certificate{Subject: pkix.Name{CommonName: name}, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	if usage == x509.ExtKeyUsageServerAuth {
		template.IPAddresses, template.DNSNames = []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"}
	}
	_, key, der := sign(t, template, a.cert, a.key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// writePEM writes cert and its key into the test's temp dir: the paths.
func writePEM(t *testing.T, name string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	for path, block := range map[string]*pem.Block{
		certFile: {Type: "CERTIFICATE", Bytes: cert.Certificate[0]},
		keyFile:  {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// roundTrip dials s with opts and adds, takes and finishes a key: the first error.
func roundTrip(t *testing.T, s *sidecar, opts ...workqueue.DialOption) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	client, err := workqueue.Dial(ctx, s.Target, append(opts, workqueue.WithLogger(testLogger(t)))...)
	if err != nil {
		return err
	}
	defer client.Close()
	queue := client.Queue("default")
	if err := queue.Add(ctx, t.Name()); err != nil {
		return err
	}
	lease, err := queue.Get(ctx, time.Second)
	if err != nil {
		return err
	}
	return lease.Done(ctx)
}

func TestTLSServesClientsThatTrustItsCA(t *testing.T) {
	ca, other := newAuthority(t, "wq test ca"), newAuthority(t, "wq test other ca")
	certFile, keyFile := writePEM(t, "server", ca.issue(t, "server", x509.ExtKeyUsageServerAuth))
	s := startSidecar(t, "--tls-cert", certFile, "--tls-key", keyFile)

	if err := roundTrip(t, s, workqueue.WithTLS(&tls.Config{RootCAs: ca.pool})); err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	err := roundTrip(t, s, workqueue.WithTLS(&tls.Config{RootCAs: other.pool}))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client trusting another CA must fail, saying why: %v", err)
	}
	if err := roundTrip(t, s); err == nil {
		t.Fatal("a plaintext client must fail")
	}
}

func TestMutualTLSNeedsAClientCertificateOfItsCA(t *testing.T) {
	ca, other := newAuthority(t, "wq test ca"), newAuthority(t, "wq test other ca")
	certFile, keyFile := writePEM(t, "server", ca.issue(t, "server", x509.ExtKeyUsageServerAuth))
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSidecar(t, "--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile)
	withCert := func(certs ...tls.Certificate) workqueue.DialOption {
		return workqueue.WithTLS(&tls.Config{RootCAs: ca.pool, Certificates: certs})
	}

	if err := roundTrip(t, s, withCert(ca.issue(t, "client", x509.ExtKeyUsageClientAuth))); err != nil {
		t.Fatalf("a client with a certificate of the client CA: %v", err)
	}
	if err := roundTrip(t, s, withCert()); err == nil {
		t.Fatal("a client without a certificate must fail")
	}
	if err := roundTrip(t, s, withCert(other.issue(t, "stranger", x509.ExtKeyUsageClientAuth))); err == nil {
		t.Fatal("a client with a certificate of another CA must fail")
	}
}
