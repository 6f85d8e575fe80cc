// Command verify_note checks a signed note with Go's own verifier, golang.org/x/mod/sumdb/note:
// the one Go's module checksum database uses, written by others than the ledger's authors.
//
//	verify_note VKEY FILE
//
// It prints the verified note text and exits 0, or prints why the note was rejected and exits 1;
// a verifier key or file it cannot use exits 2. Built offline from Debian's
// golang-golang-x-mod-dev: GO111MODULE=off GOPATH=/usr/share/gocode go build verify_note.go
package main

import (
	"fmt"
	"os"

	"golang.org/x/mod/sumdb/note"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: verify_note VKEY FILE")
		os.Exit(2)
	}
	verifier, err := note.NewVerifier(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "unusable verifier key:", err)
		os.Exit(2)
	}
	msg, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "unreadable note:", err)
		os.Exit(2)
	}
	opened, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		fmt.Println("rejected:", err)
		os.Exit(1)
	}
	for _, sig := range opened.Sigs {
		fmt.Printf("verified: %s+%08x\n", sig.Name, sig.Hash)
	}
	fmt.Print(opened.Text)
}
