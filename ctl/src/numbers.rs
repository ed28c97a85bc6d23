//! Numbers on the command line, written as configuration files write them:
//! decimal, or hexadecimal after `0x` (region keys are usually hex).

/// A number of type `T`, decimal or `0x` hexadecimal, refused with what was
/// expected when it does not parse or does not fit.
pub fn parse<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => s.replace('_', "").parse(),
    };
    let value =
        parsed.map_err(|_| format!("'{s}' is not a number (decimal, or hexadecimal after 0x)"))?;
    T::try_from(value)
        .map_err(|_| format!("{s} does not fit in {} bits", 8 * core::mem::size_of::<T>()))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn decimal_and_hexadecimal_both_parse() {
        assert_eq!(parse::<u32>("0x0ae1"), Ok(0x0ae1));
        assert_eq!(parse::<u32>("0XAE1"), Ok(0xae1));
        assert_eq!(parse::<u32>("2785"), Ok(2785));
        assert_eq!(parse::<u64>("1_000"), Ok(1000));
    }

    #[test]
    fn junk_and_overflow_are_refused_with_the_form_expected() {
        let junk = parse::<u32>("ae1").unwrap_err();
        assert!(junk.contains("hexadecimal after 0x"), "{junk}");
        let big = parse::<u16>("0x10000").unwrap_err();
        assert!(big.contains("16 bits"), "{big}");
    }
}
