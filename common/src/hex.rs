//! Bytes as hexadecimal text: link keys, WRITE data, captured frames and
//! region dumps. One decoder for all of them, so every place that reads
//! hex refuses the same junk with the same words and none can panic.

use std::fmt;
use std::string::String;
use std::vec::Vec;

/// Why a text is not hex bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HexError {
    /// An odd number of digits (after an optional `0x`).
    OddLength { digits: usize },
    /// Something other than `0-9`, `a-f` or `A-F` at this character
    /// position (counted after the `0x`, from 0).
    NotADigit { position: usize, found: char },
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HexError::OddLength { digits } => write!(
                f,
                "hex data has an odd number of digits ({digits}): write two digits a byte"
            ),
            HexError::NotADigit { position, found } => write!(
                f,
                "{found:?} at position {position} is not a hex digit: use 0-9 and a-f"
            ),
        }
    }
}

impl std::error::Error for HexError {}

/// Lower-case hex, two digits a byte.
pub fn encode(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// Hex digits, two a byte, after an optional `0x`. Each character is
/// checked first, so the error names the character and its position
/// (multi-byte UTF-8 included, never sliced inside) and signs and spaces
/// are refused like any other non-digit; the `hex` crate then converts.
pub fn decode(text: &str) -> Result<Vec<u8>, HexError> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    if let Some((position, found)) = digits
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_hexdigit())
    {
        return Err(HexError::NotADigit { position, found });
    }
    // Every character is an ASCII digit: bytes and characters agree.
    if digits.len() % 2 == 1 {
        return Err(HexError::OddLength {
            digits: digits.len(),
        });
    }
    hex::decode(digits).map_err(|_| HexError::OddLength {
        digits: digits.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
        assert_eq!(decode("0xABcd").unwrap(), [0xab, 0xcd]);
        assert_eq!(decode("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn refuses_junk_without_panicking() {
        // A two-byte character where a digit pair would be cut in half.
        assert_eq!(
            decode("aéa"),
            Err(HexError::NotADigit {
                position: 1,
                found: 'é'
            })
        );
        assert_eq!(
            decode("é"),
            Err(HexError::NotADigit {
                position: 0,
                found: 'é'
            })
        );
        // from_str_radix would take a sign as part of a byte.
        assert!(matches!(
            decode("+a"),
            Err(HexError::NotADigit { position: 0, .. })
        ));
        assert!(matches!(
            decode("a b1"),
            Err(HexError::NotADigit { position: 1, .. })
        ));
        assert_eq!(decode("abc"), Err(HexError::OddLength { digits: 3 }));
        assert!(
            decode("zz")
                .unwrap_err()
                .to_string()
                .contains("not a hex digit")
        );
    }
}
