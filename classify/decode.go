package classify

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"
	"sync"
)

// encoding is how a response body is encoded on the wire, as far as the
// classifier is concerned.
type encoding uint8

const (
	encIdentity    encoding = iota // no Content-Encoding, or identity
	encGzip                        // gzip or x-gzip
	encDeflate                     // deflate: zlib-wrapped, or raw as some servers send it
	encUnsupported                 // br, zstd, compress, or a chain of codings
)

// encodingOf returns the Content-Encoding of a response. net/http removes
// the field when it decompressed the body itself (the caller did not set
// Accept-Encoding); it remains when the caller asked for an encoding and
// receives the encoded bytes.
func encodingOf(h http.Header) encoding {
	enc := encIdentity
	for _, v := range h["Content-Encoding"] {
		for part := range strings.SplitSeq(v, ",") {
			part = trimOWS(part)
			var e encoding
			switch {
			case part == "", strings.EqualFold(part, "identity"):
				continue
			case strings.EqualFold(part, "gzip"), strings.EqualFold(part, "x-gzip"):
				e = encGzip
			case strings.EqualFold(part, "deflate"):
				e = encDeflate
			default:
				return encUnsupported
			}
			if enc != encIdentity {
				return encUnsupported // two codings: not worth undoing
			}
			enc = e
		}
	}
	return enc
}

// Decoders are pooled: a flate decompressor holds some 40 KB of tables.
var (
	gzipReaders  sync.Pool // *gzip.Reader
	zlibReaders  sync.Pool // io.ReadCloser implementing zlib.Resetter
	flateReaders sync.Pool // io.ReadCloser implementing flate.Resetter
)

// decodeHead decompresses the leading bytes of an encoded body into dst and
// returns how many bytes it wrote. head is only the start of the stream, so
// decoding stops at the end of head (or when dst is full) and reports what
// it could decode; a head that does not decode at all yields 0. The output
// is bounded by len(dst), whatever the compression ratio.
func decodeHead(dst, head []byte, enc encoding) int {
	src := bytes.NewReader(head)
	switch enc {
	case encGzip:
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(src)
		} else {
			err = zr.Reset(src)
		}
		if err != nil {
			return 0
		}
		defer gzipReaders.Put(zr)
		zr.Multistream(false)
		n, _ := io.ReadFull(zr, dst)
		return n
	case encDeflate:
		if n, ok := readZlib(dst, src); ok {
			return n
		}
		src.Reset(head)
		return readFlate(dst, src)
	}
	return 0
}

// readZlib decodes a zlib stream; ok is false when head has no zlib header.
func readZlib(dst []byte, src io.Reader) (int, bool) {
	zr, _ := zlibReaders.Get().(io.ReadCloser)
	var err error
	if zr == nil {
		zr, err = zlib.NewReader(src)
	} else {
		err = zr.(zlib.Resetter).Reset(src, nil)
	}
	if err != nil {
		if zr != nil {
			zlibReaders.Put(zr)
		}
		return 0, false
	}
	defer zlibReaders.Put(zr)
	n, _ := io.ReadFull(zr, dst)
	return n, true
}

// readFlate decodes a raw DEFLATE stream.
func readFlate(dst []byte, src io.Reader) int {
	fr, _ := flateReaders.Get().(io.ReadCloser)
	if fr == nil {
		fr = flate.NewReader(src)
	} else if err := fr.(flate.Resetter).Reset(src, nil); err != nil {
		return 0
	}
	defer flateReaders.Put(fr)
	n, _ := io.ReadFull(fr, dst)
	return n
}
