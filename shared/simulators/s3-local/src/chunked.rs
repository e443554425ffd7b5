//! The `aws-chunked` content encoding, decoded as it streams in:
//!
//! ```text
//! <hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0[;chunk-signature=<sig>]\r\n
//! [<trailer name>:<value>\r\n ...][x-amz-trailer-signature:<sig>\r\n]\r\n
//! ```
//!
//! Signed chunks are checked against the request's signature chain; a chunk
//! that fails is reported before anything after it is accepted (the caller
//! discards what it wrote, so a forged body never becomes an object).

use crate::sigv4::ChunkSigner;
use sha2::{Digest, Sha256};

/// A size line or trailer line longer than this is not `aws-chunked`.
const MAX_LINE: usize = 4096;
const MAX_TRAILERS: usize = 16;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ChunkError {
    #[error("malformed aws-chunked body: {0}")]
    Malformed(&'static str),
    #[error("a chunk signature does not match")]
    BadChunkSignature,
    #[error("the trailer signature does not match")]
    BadTrailerSignature,
    #[error("the aws-chunked body ended early")]
    Truncated,
}

enum State {
    SizeLine,
    Data { remaining: u64 },
    DataEnd { seen: u8 },
    Trailers,
    Done,
}

pub(crate) struct ChunkDecoder {
    state: State,
    line: Vec<u8>,
    /// `Some` for `STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`.
    signer: Option<ChunkSigner>,
    signed_trailer: bool,
    chunk_hash: Sha256,
    chunk_signature: String,
    trailers: Vec<(String, String)>,
}

impl ChunkDecoder {
    pub(crate) fn unsigned() -> Self {
        Self::new(None, false)
    }

    pub(crate) fn signed(signer: ChunkSigner, trailer: bool) -> Self {
        Self::new(Some(signer), trailer)
    }

    fn new(signer: Option<ChunkSigner>, signed_trailer: bool) -> Self {
        ChunkDecoder {
            state: State::SizeLine,
            line: Vec::new(),
            signer,
            signed_trailer,
            chunk_hash: Sha256::new(),
            chunk_signature: String::new(),
            trailers: Vec::new(),
        }
    }

    /// Decodes `input`, appending the data it carries to `out`.
    pub(crate) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), ChunkError> {
        while !input.is_empty() {
            match &mut self.state {
                State::SizeLine => {
                    if take_line(&mut self.line, &mut input)? {
                        self.size_line()?;
                    }
                }
                State::Data { remaining } => {
                    let n = usize::try_from(*remaining)
                        .unwrap_or(usize::MAX)
                        .min(input.len());
                    let (data, rest) = input.split_at(n);
                    out.extend_from_slice(data);
                    if self.signer.is_some() {
                        self.chunk_hash.update(data);
                    }
                    *remaining -= n as u64;
                    input = rest;
                    if *remaining == 0 {
                        self.state = State::DataEnd { seen: 0 };
                    }
                }
                State::DataEnd { seen } => {
                    let expected = if *seen == 0 { b'\r' } else { b'\n' };
                    if input[0] != expected {
                        return Err(ChunkError::Malformed("chunk data not followed by CRLF"));
                    }
                    input = &input[1..];
                    *seen += 1;
                    if *seen == 2 {
                        self.check_chunk_signature()?;
                        self.state = State::SizeLine;
                    }
                }
                State::Trailers => {
                    if take_line(&mut self.line, &mut input)? {
                        self.trailer_line()?;
                    }
                }
                State::Done => {
                    return Err(ChunkError::Malformed("data after the final chunk"));
                }
            }
        }
        Ok(())
    }

    /// Ends the body; returns the trailers (lower-case names), without the
    /// trailer signature.
    pub(crate) fn finish(mut self) -> Result<Vec<(String, String)>, ChunkError> {
        match self.state {
            State::Done => {}
            // Some clients end the body right after the last trailer, without
            // the empty line.
            State::Trailers if self.line.is_empty() => self.end_trailers()?,
            _ => return Err(ChunkError::Truncated),
        }
        Ok(self.trailers)
    }

    fn size_line(&mut self) -> Result<(), ChunkError> {
        let line = std::mem::take(&mut self.line);
        let text = std::str::from_utf8(&line).map_err(|_| ChunkError::Malformed("size line"))?;
        let mut fields = text.split(';');
        let size_text = fields.next().unwrap_or_default().trim();
        if size_text.is_empty() || size_text.len() > 16 {
            return Err(ChunkError::Malformed("chunk size"));
        }
        let size =
            u64::from_str_radix(size_text, 16).map_err(|_| ChunkError::Malformed("chunk size"))?;
        let signature = fields.find_map(|f| f.trim().strip_prefix("chunk-signature="));
        if self.signer.is_some() {
            let signature = signature.ok_or(ChunkError::Malformed("missing chunk-signature"))?;
            self.chunk_signature = signature.to_string();
        }
        if size == 0 {
            self.check_chunk_signature()?;
            self.state = State::Trailers;
        } else {
            self.state = State::Data { remaining: size };
        }
        Ok(())
    }

    fn check_chunk_signature(&mut self) -> Result<(), ChunkError> {
        if let Some(signer) = &mut self.signer {
            let digest = std::mem::take(&mut self.chunk_hash).finalize();
            if !signer.verify_chunk(&digest, &self.chunk_signature) {
                return Err(ChunkError::BadChunkSignature);
            }
        }
        Ok(())
    }

    fn trailer_line(&mut self) -> Result<(), ChunkError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            return self.end_trailers();
        }
        let text = std::str::from_utf8(&line).map_err(|_| ChunkError::Malformed("trailer"))?;
        let (name, value) = text
            .split_once(':')
            .ok_or(ChunkError::Malformed("trailer without a colon"))?;
        if self.trailers.len() >= MAX_TRAILERS {
            return Err(ChunkError::Malformed("too many trailers"));
        }
        self.trailers
            .push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        Ok(())
    }

    fn end_trailers(&mut self) -> Result<(), ChunkError> {
        let signature = self
            .trailers
            .iter()
            .position(|(name, _)| name == "x-amz-trailer-signature")
            .map(|i| self.trailers.remove(i).1);
        if let (Some(signer), true) = (&mut self.signer, self.signed_trailer) {
            let signature = signature.ok_or(ChunkError::BadTrailerSignature)?;
            let canonical: String = self
                .trailers
                .iter()
                .map(|(name, value)| format!("{name}:{value}\n"))
                .collect();
            if !signer.verify_trailer(&canonical, &signature) {
                return Err(ChunkError::BadTrailerSignature);
            }
        }
        self.state = State::Done;
        Ok(())
    }
}

/// Moves bytes from `input` into `line` up to a CRLF; true when the line is
/// complete (without the CRLF), false when more input is needed.
fn take_line(line: &mut Vec<u8>, input: &mut &[u8]) -> Result<bool, ChunkError> {
    match input.iter().position(|&b| b == b'\n') {
        Some(i) => {
            line.extend_from_slice(&input[..i]);
            *input = &input[i + 1..];
            if line.last() != Some(&b'\r') {
                return Err(ChunkError::Malformed("line not ended by CRLF"));
            }
            line.pop();
            Ok(true)
        }
        None => {
            line.extend_from_slice(input);
            *input = &[];
            if line.len() > MAX_LINE {
                return Err(ChunkError::Malformed("line too long"));
            }
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Trailers = Vec<(String, String)>;

    fn decode_in_pieces(body: &[u8], piece: usize) -> Result<(Vec<u8>, Trailers), ChunkError> {
        let mut decoder = ChunkDecoder::unsigned();
        let mut out = Vec::new();
        for part in body.chunks(piece) {
            decoder.feed(part, &mut out)?;
        }
        Ok((out, decoder.finish()?))
    }

    #[test]
    fn decodes_unsigned_chunks_with_a_trailer_however_split() {
        let body = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
        for piece in [1, 2, 3, 7, body.len()] {
            let (data, trailers) = decode_in_pieces(body, piece).expect("decodes");
            assert_eq!(data, b"hello world");
            assert_eq!(
                trailers,
                [("x-amz-checksum-crc32".to_string(), "DUoRhQ==".to_string())]
            );
        }
    }

    #[test]
    fn accepts_a_body_ending_after_the_trailer() {
        let (data, trailers) =
            decode_in_pieces(b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n", 4).expect("ok");
        assert_eq!(data, b"abc");
        assert_eq!(trailers.len(), 1);
    }

    #[test]
    fn refuses_malformed_and_truncated_bodies() {
        for body in [
            &b"zz\r\nabc\r\n0\r\n\r\n"[..],
            b"3\r\nabcX\r\n0\r\n\r\n",
            b"3\nabc\r\n0\r\n\r\n",
            b"3\r\nabc\r\n0\r\n\r\nextra",
            b"0\r\ntrailer-without-colon\r\n\r\n",
        ] {
            assert!(
                matches!(decode_in_pieces(body, 5), Err(ChunkError::Malformed(_))),
                "{body:?}"
            );
        }
        for body in [&b""[..], b"3\r\nab", b"3\r\nabc\r\n"] {
            assert_eq!(
                decode_in_pieces(body, 5).err(),
                Some(ChunkError::Truncated),
                "{body:?}"
            );
        }
    }

    fn aws_example_body() -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(b"10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n");
        body.extend(std::iter::repeat_n(b'a', 65536));
        body.extend_from_slice(b"\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n");
        body.extend(std::iter::repeat_n(b'a', 1024));
        body.extend_from_slice(b"\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n");
        body
    }

    fn decode_signed(body: &[u8]) -> Result<Vec<u8>, ChunkError> {
        let mut decoder = ChunkDecoder::signed(crate::sigv4::aws_example_signer(), false);
        let mut out = Vec::new();
        for part in body.chunks(1000) {
            decoder.feed(part, &mut out)?;
        }
        decoder.finish()?;
        Ok(out)
    }

    #[test]
    fn decodes_the_aws_signed_chunks_example() {
        let out = decode_signed(&aws_example_body()).expect("verifies");
        assert_eq!(out.len(), 66560);
        assert!(out.iter().all(|&b| b == b'a'));
    }

    #[test]
    fn refuses_a_tampered_signed_chunk() {
        let mut body = aws_example_body();
        body[200] = b'b';
        assert_eq!(
            decode_signed(&body).err(),
            Some(ChunkError::BadChunkSignature)
        );
        // A dropped final chunk is a truncation, not an accepted body.
        let body = aws_example_body();
        let cut = body.len() - 90;
        assert_eq!(
            decode_signed(&body[..cut]).err(),
            Some(ChunkError::Truncated)
        );
    }
}
