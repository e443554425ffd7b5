//! S3's flexible checksums (`x-amz-checksum-*`), which current AWS SDKs send
//! with every upload: as a header, or as a trailer after an `aws-chunked`
//! body.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha1::Digest as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum ChecksumAlgorithm {
    Crc32,
    Crc32c,
    Crc64Nvme,
    Sha1,
    Sha256,
}

pub(crate) const ALL: [ChecksumAlgorithm; 5] = [
    ChecksumAlgorithm::Crc32,
    ChecksumAlgorithm::Crc32c,
    ChecksumAlgorithm::Crc64Nvme,
    ChecksumAlgorithm::Sha1,
    ChecksumAlgorithm::Sha256,
];

impl ChecksumAlgorithm {
    pub(crate) fn header_name(self) -> &'static str {
        match self {
            ChecksumAlgorithm::Crc32 => "x-amz-checksum-crc32",
            ChecksumAlgorithm::Crc32c => "x-amz-checksum-crc32c",
            ChecksumAlgorithm::Crc64Nvme => "x-amz-checksum-crc64nvme",
            ChecksumAlgorithm::Sha1 => "x-amz-checksum-sha1",
            ChecksumAlgorithm::Sha256 => "x-amz-checksum-sha256",
        }
    }

    pub(crate) fn from_header_name(name: &str) -> Option<Self> {
        let name = name.trim();
        ALL.into_iter()
            .find(|a| a.header_name().eq_ignore_ascii_case(name))
    }

    /// As `x-amz-sdk-checksum-algorithm` / `x-amz-checksum-algorithm` name it.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        let name = name.trim();
        ALL.into_iter()
            .find(|a| a.header_name()["x-amz-checksum-".len()..].eq_ignore_ascii_case(name))
    }

    pub(crate) fn hasher(self) -> Hasher {
        match self {
            ChecksumAlgorithm::Crc32 => {
                Hasher::Crc32(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32IsoHdlc))
            }
            ChecksumAlgorithm::Crc32c => {
                Hasher::Crc32(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi))
            }
            ChecksumAlgorithm::Crc64Nvme => {
                Hasher::Crc64(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Nvme))
            }
            ChecksumAlgorithm::Sha1 => Hasher::Sha1(sha1::Sha1::new()),
            ChecksumAlgorithm::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
        }
    }
}

pub(crate) enum Hasher {
    Crc32(crc_fast::Digest),
    Crc64(crc_fast::Digest),
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Hasher {
    pub(crate) fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Crc32(d) | Hasher::Crc64(d) => d.update(data),
            Hasher::Sha1(d) => d.update(data),
            Hasher::Sha256(d) => d.update(data),
        }
    }

    /// The value as S3 writes it: base64 of the big-endian digest.
    pub(crate) fn finish_base64(self) -> String {
        match self {
            // A CRC-32 is the low 32 bits of the u64 crc-fast returns.
            Hasher::Crc32(d) => BASE64.encode((d.finalize() as u32).to_be_bytes()),
            Hasher::Crc64(d) => BASE64.encode(d.finalize().to_be_bytes()),
            Hasher::Sha1(d) => BASE64.encode(d.finalize()),
            Hasher::Sha256(d) => BASE64.encode(d.finalize()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(algorithm: ChecksumAlgorithm, data: &[u8]) -> String {
        let mut h = algorithm.hasher();
        h.update(data);
        h.finish_base64()
    }

    #[test]
    fn known_values() {
        // Check values of "123456789" from the CRC catalogue, as base64 of
        // big-endian bytes.
        assert_eq!(
            of(ChecksumAlgorithm::Crc32, b"123456789"),
            BASE64.encode(0xCBF4_3926u32.to_be_bytes())
        );
        assert_eq!(
            of(ChecksumAlgorithm::Crc32c, b"123456789"),
            BASE64.encode(0xE306_9283u32.to_be_bytes())
        );
        assert_eq!(
            of(ChecksumAlgorithm::Crc64Nvme, b"123456789"),
            BASE64.encode(0xAE8B_1486_0A79_9888u64.to_be_bytes())
        );
        assert_eq!(
            of(ChecksumAlgorithm::Sha256, b""),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
    }

    #[test]
    fn names() {
        assert_eq!(
            ChecksumAlgorithm::from_header_name("X-Amz-Checksum-CRC64NVME"),
            Some(ChecksumAlgorithm::Crc64Nvme)
        );
        assert_eq!(
            ChecksumAlgorithm::from_name("crc32"),
            Some(ChecksumAlgorithm::Crc32)
        );
        assert_eq!(ChecksumAlgorithm::from_name("md5"), None);
    }
}
