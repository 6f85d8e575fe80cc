// Command verify_proof checks a C2SP tlog-proof (c2sp.org/tlog-proof) whose extra line is the
// logged entry, with Go's own transparency-log code: golang.org/x/mod/sumdb/note opens the
// checkpoint note, golang.org/x/mod/sumdb/tlog checks the inclusion path of
// tlog.RecordHash(extra) with tlog.CheckRecord. Neither was written by the ledger's authors.
//
//	verify_proof VKEY FILE
//
// It prints "verified: INDEX SIZE" and exits 0, or prints why the proof was rejected and exits 1;
// a verifier key or file it cannot use exits 2. Built offline from Debian's
// golang-golang-x-mod-dev: GO111MODULE=off GOPATH=/usr/share/gocode go build verify_proof.go
package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func reject(args ...any) {
	fmt.Println(append([]any{"rejected:"}, args...)...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: verify_proof VKEY FILE")
		os.Exit(2)
	}
	verifier, err := note.NewVerifier(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "unusable verifier key:", err)
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "unreadable proof:", err)
		os.Exit(2)
	}
	head, checkpoint, found := bytes.Cut(data, []byte("\n\n"))
	if !found {
		reject("no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" || len(lines) < 3 || !strings.HasPrefix(lines[1], "extra ") {
		reject("not a tlog-proof with an extra line")
	}
	extra, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[1], "extra "))
	if err != nil {
		reject("extra is not base64:", err)
	}
	index, err := strconv.ParseInt(strings.TrimPrefix(lines[2], "index "), 10, 64)
	if err != nil || !strings.HasPrefix(lines[2], "index ") {
		reject("bad index line:", lines[2])
	}
	var proof tlog.RecordProof
	for _, line := range lines[3:] {
		hash, err := tlog.ParseHash(line)
		if err != nil {
			reject("bad proof hash:", line)
		}
		proof = append(proof, hash)
	}
	opened, err := note.Open(checkpoint, note.VerifierList(verifier))
	if err != nil {
		reject(err)
	}
	body := strings.Split(opened.Text, "\n")
	if len(body) != 4 || body[0] != verifier.Name() {
		reject("not a checkpoint of", verifier.Name())
	}
	size, err := strconv.ParseInt(body[1], 10, 64)
	if err != nil {
		reject("bad tree size:", body[1])
	}
	root, err := tlog.ParseHash(body[2])
	if err != nil {
		reject("bad root hash:", body[2])
	}
	if err := tlog.CheckRecord(proof, size, root, index, tlog.RecordHash(extra)); err != nil {
		reject(err)
	}
	fmt.Printf("verified: %d %d\n", index, size)
}
