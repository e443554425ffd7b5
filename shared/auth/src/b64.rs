/// Decodes unpadded base64url, the only encoding RFC 7515 allows in a compact
/// JWS. Used just to read the header before choosing a key; jsonwebtoken
/// decodes everything again when it verifies.
pub(crate) fn decode_url_unpadded(input: &str) -> Option<Vec<u8>> {
    // A single leftover character carries only 6 bits: never a whole byte.
    if input.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(input.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for byte in input.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Non-zero padding bits mean a second spelling of the same bytes; refuse
    // it so that one header has exactly one encoding.
    if acc != 0 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::decode_url_unpadded as decode;

    #[test]
    fn decodes_rfc4648_vectors_without_padding() {
        assert_eq!(decode(""), Some(vec![]));
        assert_eq!(decode("Zg"), Some(b"f".to_vec()));
        assert_eq!(decode("Zm8"), Some(b"fo".to_vec()));
        assert_eq!(decode("Zm9v"), Some(b"foo".to_vec()));
        assert_eq!(decode("Zm9vYg"), Some(b"foob".to_vec()));
        assert_eq!(decode("Zm9vYmE"), Some(b"fooba".to_vec()));
        assert_eq!(decode("Zm9vYmFy"), Some(b"foobar".to_vec()));
        assert_eq!(decode("-_8"), Some(vec![0xfb, 0xff]));
    }

    #[test]
    fn refuses_padding_other_alphabets_and_bad_lengths() {
        assert_eq!(decode("Zg=="), None);
        assert_eq!(decode("+/8"), None);
        assert_eq!(decode("Z"), None);
        assert_eq!(decode("Zh"), None);
        assert_eq!(decode("Zm 9v"), None);
    }
}
