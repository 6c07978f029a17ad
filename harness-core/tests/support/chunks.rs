//! The bytes of a property test cut into chunks at arbitrary points, as a reader's pushes.

/// `bytes` cut at `cuts` (each taken modulo `bytes.len() + 1`, then sorted): the chunks in
/// order, empty ones included, the last running to the end.
pub fn chunks<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut start = 0;
    cuts.into_iter()
        .chain([bytes.len()])
        .map(|cut| {
            let chunk = &bytes[start..cut];
            start = cut;
            chunk
        })
        .collect()
}
