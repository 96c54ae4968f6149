//! The memory-bound loop's buffer: a random cyclic permutation of `u32` indices, sized from
//! the last-level cache that the kernel reports under
//! `<sys>/devices/system/cpu/cpu0/cache/index*/{level,type,size}` (Documentation/ABI/testing/
//! sysfs-devices-system-cpu). Sizes are in bytes.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::WorkloadError;

/// Buffer size, in bytes, used when the last-level cache size is unknown.
pub const DEFAULT_CHASE_BYTES: usize = 64 << 20;
/// Largest buffer, in bytes, that sizing from the cache will pick (a home server's RAM is not
/// ours to spend).
pub const MAX_CHASE_BYTES: usize = 256 << 20;
/// Smallest buffer, in bytes, that sizing from the cache will pick.
pub const MIN_CHASE_BYTES: usize = 8 << 20;
/// How many times the last-level cache the buffer should span, so nearly every step misses.
pub const CACHE_MULTIPLE: u64 = 4;

/// Size of the last-level cache of CPU 0 in bytes, read from the cache tree under `sys_root`
/// (the sysfs root from config, `/sys` in production). `None` when the tree is missing or
/// holds no readable data or unified cache. Instruction caches are ignored.
pub fn last_level_cache_bytes(sys_root: &Path) -> Option<u64> {
    let dir = sys_root.join("devices/system/cpu/cpu0/cache");
    let entries = fs::read_dir(&dir).ok()?;
    let mut best: Option<(u32, u64)> = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("index") {
            continue;
        }
        let path = entry.path();
        let read = |file: &str| fs::read_to_string(path.join(file)).ok();
        if read("type").is_some_and(|t| t.trim() == "Instruction") {
            continue;
        }
        let Some(level) = read("level").and_then(|l| l.trim().parse::<u32>().ok()) else {
            continue;
        };
        let Some(size) = read("size").and_then(|s| parse_cache_size(&s)) else {
            continue;
        };
        if best.is_none_or(|(l, s)| level > l || (level == l && size > s)) {
            best = Some((level, size));
        }
    }
    best.map(|(_, size)| size)
}

/// Parses a sysfs cache size such as `32768K`, `8M`, `1G` or `524288` into bytes.
fn parse_cache_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 10),
        b'M' | b'm' => (&text[..text.len() - 1], 20),
        b'G' | b'g' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let value: u64 = digits.trim().parse().ok()?;
    value.checked_mul(1 << shift).filter(|&b| b > 0)
}

/// Buffer size in bytes for a last-level cache of `llc_bytes`: [`CACHE_MULTIPLE`] times the
/// cache, clamped to [`MIN_CHASE_BYTES`]..=[`MAX_CHASE_BYTES`]; [`DEFAULT_CHASE_BYTES`] when
/// the cache size is unknown.
pub fn chase_bytes_for(llc_bytes: Option<u64>) -> usize {
    match llc_bytes {
        None => DEFAULT_CHASE_BYTES,
        Some(llc) => {
            let want = llc.saturating_mul(CACHE_MULTIPLE);
            want.clamp(MIN_CHASE_BYTES as u64, MAX_CHASE_BYTES as u64) as usize
        }
    }
}

/// A read-only random cyclic permutation: following `next = buf[next]` from any index visits
/// every entry once before it returns, so each load depends on the one before and the
/// hardware prefetcher cannot guess the next address. Cheap to clone (shared).
#[derive(Clone)]
pub struct ChaseBuffer {
    next: Arc<[u32]>,
}

impl std::fmt::Debug for ChaseBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChaseBuffer")
            .field("entries", &self.next.len())
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl ChaseBuffer {
    /// Builds a buffer of about `bytes` bytes (rounded down to whole 4-byte entries) holding
    /// one cycle through all entries (Sattolo's algorithm), shuffled from `seed`.
    /// Errors when `bytes` is under 8 (two entries) or over [`MAX_CHASE_BYTES`].
    pub fn with_bytes(bytes: usize, seed: u64) -> Result<ChaseBuffer, WorkloadError> {
        let entries = bytes / size_of::<u32>();
        if entries < 2 || bytes > MAX_CHASE_BYTES {
            return Err(WorkloadError::ChaseSize { bytes });
        }
        Ok(ChaseBuffer {
            next: sattolo(entries, seed).into(),
        })
    }

    /// Builds a buffer sized from the last-level cache found under `sys_root` (see
    /// [`chase_bytes_for`]).
    pub fn for_machine(sys_root: &Path) -> Result<ChaseBuffer, WorkloadError> {
        let bytes = chase_bytes_for(last_level_cache_bytes(sys_root));
        ChaseBuffer::with_bytes(bytes, 0x5eed_cafe_f00d_d00d)
    }

    /// Number of `u32` entries.
    pub fn len(&self) -> usize {
        self.next.len()
    }

    /// Always false: a buffer holds at least two entries.
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.next.len() * size_of::<u32>()
    }

    pub(super) fn entries(&self) -> &[u32] {
        &self.next
    }
}

/// A random single cycle over `0..n` (Sattolo, 1986): `perm[i]` is the successor of `i`.
fn sattolo(n: usize, seed: u64) -> Vec<u32> {
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut rng = SplitMix64(seed);
    for i in (1..n).rev() {
        // j uniform in 0..i (exclusive of i) is what makes the result a single cycle.
        let j = ((u128::from(rng.next()) * i as u128) >> 64) as usize;
        perm.swap(i, j);
    }
    perm
}

/// `SplitMix64`: a tiny, fast generator; shuffling needs spread, not cryptography.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Writes one `index<N>` directory of a fake sysfs cache tree.
    fn cache_index(root: &Path, n: u32, level: &str, kind: &str, size: &str) {
        let dir: PathBuf = root.join(format!("devices/system/cpu/cpu0/cache/index{n}"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("level"), format!("{level}\n")).unwrap();
        fs::write(dir.join("type"), format!("{kind}\n")).unwrap();
        fs::write(dir.join("size"), format!("{size}\n")).unwrap();
    }

    #[test]
    fn llc_is_the_highest_level_data_or_unified_cache() {
        // Layout of an AMD EPYC guest: L1d, L1i, L2, L3.
        let tmp = tempfile::tempdir().unwrap();
        cache_index(tmp.path(), 0, "1", "Data", "32K");
        cache_index(tmp.path(), 1, "1", "Instruction", "32K");
        cache_index(tmp.path(), 2, "2", "Unified", "512K");
        cache_index(tmp.path(), 3, "3", "Unified", "32768K");
        assert_eq!(last_level_cache_bytes(tmp.path()), Some(32 << 20));
        assert_eq!(chase_bytes_for(Some(32 << 20)), 128 << 20);
    }

    #[test]
    fn instruction_cache_is_ignored_even_at_the_top_level() {
        let tmp = tempfile::tempdir().unwrap();
        cache_index(tmp.path(), 0, "1", "Data", "48K");
        cache_index(tmp.path(), 1, "2", "Instruction", "4M");
        assert_eq!(last_level_cache_bytes(tmp.path()), Some(48 << 10));
    }

    #[test]
    fn missing_or_garbled_tree_means_default_size() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(last_level_cache_bytes(tmp.path()), None);
        cache_index(tmp.path(), 0, "three", "Unified", "8M");
        cache_index(tmp.path(), 1, "3", "Unified", "lots");
        assert_eq!(last_level_cache_bytes(tmp.path()), None);
        assert_eq!(chase_bytes_for(None), DEFAULT_CHASE_BYTES);
    }

    #[test]
    fn buffer_size_is_clamped() {
        assert_eq!(chase_bytes_for(Some(512 << 10)), MIN_CHASE_BYTES);
        assert_eq!(chase_bytes_for(Some(1 << 30)), MAX_CHASE_BYTES);
        assert_eq!(chase_bytes_for(Some(u64::MAX)), MAX_CHASE_BYTES);
    }

    #[test]
    fn sizes_parse_with_and_without_suffix() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(parse_cache_size("1G"), Some(1 << 30));
        assert_eq!(parse_cache_size("524288"), Some(524_288));
        assert_eq!(parse_cache_size("0K"), None);
        assert_eq!(parse_cache_size(""), None);
        assert_eq!(parse_cache_size("K"), None);
    }

    #[test]
    fn sattolo_makes_one_cycle_through_every_entry() {
        for (n, seed) in [(2, 1), (3, 7), (1000, 42), (4097, 9)] {
            let perm = sattolo(n, seed);
            let mut seen = vec![false; n];
            let mut i = 0usize;
            for _ in 0..n {
                assert!(!seen[i], "index {i} visited twice (n={n})");
                seen[i] = true;
                i = perm[i] as usize;
            }
            assert_eq!(i, 0, "cycle of n={n} did not close after n steps");
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn buffer_rejects_sizes_it_cannot_chase() {
        assert!(ChaseBuffer::with_bytes(4, 1).is_err());
        assert!(ChaseBuffer::with_bytes(MAX_CHASE_BYTES + 4, 1).is_err());
        let b = ChaseBuffer::with_bytes(4096, 1).unwrap();
        assert_eq!((b.len(), b.bytes()), (1024, 4096));
    }

    #[test]
    fn buffer_sized_from_a_fake_cache_tree() {
        let tmp = tempfile::tempdir().unwrap();
        cache_index(tmp.path(), 0, "1", "Data", "32K");
        cache_index(tmp.path(), 1, "2", "Unified", "1M");
        cache_index(tmp.path(), 2, "3", "Unified", "2M");
        // 4 x 2 MiB = 8 MiB, exactly the minimum.
        let b = ChaseBuffer::for_machine(tmp.path()).unwrap();
        assert_eq!(b.bytes(), 8 << 20);
    }
}
