// Command verify_tiles checks a tlog-tiles directory with Go's own tiled-log code,
// golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog (the Go checksum database's, on
// which c2sp.org/tlog-tiles is based), written by others than the ledger's authors.
//
//	verify_tiles VKEY DIR [INDEX:HEXLEAFHASH ...] [--old SIZE:BASE64ROOT]
//
// It verifies DIR/checkpoint under VKEY, recomputes the tree hash from DIR/tile/... (every tile it
// reads is authenticated against the checkpoint by tlog.TileHashReader), checks each record's
// inclusion and, with --old, the tree's consistency with an older one. It prints "verified: SIZE"
// and exits 0, or prints why and exits 1; unusable arguments exit 2. Built offline from Debian's
// golang-golang-x-mod-dev: GO111MODULE=off GOPATH=/usr/share/gocode go build verify_tiles.go
package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// files reads tiles from a directory at their tlog-tiles paths: Go's checksum database puts the
// tile height in the path (tile/8/L/N), tlog-tiles leaves it out (tile/L/N).
type files struct{ dir string }

func (f files) Height() int { return 8 }

func (f files) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	data := make([][]byte, len(tiles))
	for i, t := range tiles {
		path := "tile/" + strings.TrimPrefix(t.Path(), "tile/8/")
		read, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(path)))
		if err != nil {
			return nil, err
		}
		data[i] = read
	}
	return data, nil
}

func (f files) SaveTiles([]tlog.Tile, [][]byte) {}

func fail(code int, args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(code)
}

func sizeAndRoot(size, root string) (int64, tlog.Hash) {
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil {
		fail(2, "bad tree size:", size)
	}
	raw, err := base64.StdEncoding.DecodeString(root)
	if err != nil || len(raw) != tlog.HashSize {
		fail(2, "bad root hash:", root)
	}
	var hash tlog.Hash
	copy(hash[:], raw)
	return n, hash
}

func main() {
	if len(os.Args) < 3 {
		fail(2, "usage: verify_tiles VKEY DIR [INDEX:HEXLEAFHASH ...] [--old SIZE:BASE64ROOT]")
	}
	verifier, err := note.NewVerifier(os.Args[1])
	if err != nil {
		fail(2, "unusable verifier key:", err)
	}
	dir := os.Args[2]
	msg, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		fail(1, "unreadable checkpoint:", err)
	}
	opened, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		fail(1, "checkpoint rejected:", err)
	}
	lines := strings.Split(opened.Text, "\n")
	if len(lines) != 4 || lines[0] != verifier.Name() {
		fail(1, "not a checkpoint of", verifier.Name())
	}
	size, root := sizeAndRoot(lines[1], lines[2])
	reader := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, files{dir})
	hash, err := tlog.TreeHash(size, reader)
	if err != nil || hash != root {
		fail(1, "the tiles do not make the checkpoint's root:", err)
	}
	args := os.Args[3:]
	for i := 0; i < len(args); i++ {
		if args[i] == "--old" && i+1 < len(args) {
			parts := strings.SplitN(args[i+1], ":", 2)
			oldSize, oldRoot := sizeAndRoot(parts[0], parts[len(parts)-1])
			proof, err := tlog.ProveTree(size, oldSize, reader)
			if err != nil || tlog.CheckTree(proof, size, root, oldSize, oldRoot) != nil {
				fail(1, "not consistent with tree size", oldSize, err)
			}
			i++
			continue
		}
		parts := strings.SplitN(args[i], ":", 2)
		index, err := strconv.ParseInt(parts[0], 10, 64)
		raw, herr := hex.DecodeString(parts[len(parts)-1])
		if len(parts) != 2 || err != nil || herr != nil || len(raw) != tlog.HashSize {
			fail(2, "bad INDEX:HEXLEAFHASH:", args[i])
		}
		var leaf tlog.Hash
		copy(leaf[:], raw)
		proof, err := tlog.ProveRecord(size, index, reader)
		if err != nil || tlog.CheckRecord(proof, size, root, index, leaf) != nil {
			fail(1, "record", index, "is not included:", err)
		}
	}
	fmt.Printf("verified: %d\n", size)
}
