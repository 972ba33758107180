package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// PKI is a throwaway certificate authority with a server certificate for
// 127.0.0.1 and localhost and a client certificate, as PEM files.
type PKI struct {
	Dir                   string
	CA                    string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	pool                  *x509.CertPool
}

// NewPKI writes a new CA, server and client certificates under a temporary
// directory.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{Dir: dir, CA: filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem")}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "deployflow test CA " + filepath.Base(dir)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err = x509.ParseCertificate(caDER)
	require.NoError(t, err)
	writePEM(t, p.CA, "CERTIFICATE", caDER)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)

	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certPath, keyPath string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		writePEM(t, certPath, "CERTIFICATE", der)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		writePEM(t, keyPath, "PRIVATE KEY", keyDER)
	}
	leaf(2, "localhost", x509.ExtKeyUsageServerAuth, p.ServerCert, p.ServerKey)
	leaf(3, "deployflow-worker", x509.ExtKeyUsageClientAuth, p.ClientCert, p.ClientKey)
	return p
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}

// TLSFront listens on 127.0.0.1 with TLS (the PKI's server certificate;
// with mutual, only clients presenting a certificate of the PKI are let
// through) and passes each connection's bytes to target, the dev server: a
// Temporal endpoint secured the way an mTLS-terminating load balancer in
// front of a Temporal cluster secures it. It returns its address and stops
// at the end of the test.
func TLSFront(t testing.TB, p *PKI, target string, mutual bool) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	require.NoError(t, err)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if mutual {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, p.pool
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer in.Close()
				if err := in.(*tls.Conn).Handshake(); err != nil {
					return // refused: wrong CA, no client certificate, plaintext
				}
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				track(in, true)
				track(out, true)
				defer track(in, false)
				defer track(out, false)
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
