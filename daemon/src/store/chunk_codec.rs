//! Chunk codec: columns of `i64` packed into one BLOB.
//!
//! A chunk is `version (u8) | n (varint) | column*`. Each column stores its first value as a
//! zigzag varint, then its deltas (order 1) or deltas of deltas (order 2, for timestamps,
//! with the first delta as a zigzag varint). The residuals are divided by their greatest
//! common divisor (a meter with 0.1 W steps stored at 0.01 W costs no extra bits) and
//! bit-packed at one width per column, with the few residuals wider than that width kept
//! as exceptions (patched frame of reference). All arithmetic wraps, so any `i64` input
//! round-trips exactly.
//!
//! Units are the caller's: timestamps in ms, values as integer multiples of the metric's
//! resolution (see [`super::resolution`]).

/// Chunk format version written in the first byte.
const VERSION: u8 = 1;

/// The most values a chunk may hold.
pub const MAX_VALUES: usize = 1 << 20;

/// How a column is differenced before packing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Deltas between neighbours: values.
    Delta,
    /// Deltas of deltas: regular timestamps cost almost nothing.
    DeltaOfDelta,
}

/// Why a chunk could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("chunk is empty")]
    Empty,
    #[error("chunk format version {0} is not supported (expected {VERSION})")]
    Version(u8),
    #[error("chunk ends early at byte {0}")]
    Truncated(usize),
    #[error("chunk has a bad field at byte {0}")]
    Bad(usize),
    #[error("chunk has {0} trailing bytes")]
    Trailing(usize),
}

/// Encodes columns of equal length into one chunk.
///
/// # Panics
/// Never; columns of unequal length are encoded at the length of the first (callers keep
/// them equal).
pub fn encode(columns: &[(&[i64], Order)]) -> Vec<u8> {
    let n = columns.first().map_or(0, |(c, _)| c.len());
    let mut out = Vec::with_capacity(16 + n * columns.len() * 2);
    out.push(VERSION);
    put_varint(&mut out, n as u64);
    for (column, order) in columns {
        encode_column(&mut out, &column[..n.min(column.len())], *order);
    }
    out
}

/// Decodes a chunk written by [`encode`] with the same column orders.
pub fn decode(data: &[u8], orders: &[Order]) -> Result<Vec<Vec<i64>>, DecodeError> {
    let mut r = Reader { data, pos: 0 };
    let version = r.byte()?;
    if version != VERSION {
        return Err(DecodeError::Version(version));
    }
    let n = r.varint()?;
    // Constant columns pack to zero bits, so the blob's length does not bound n; cap it
    // so a corrupt chunk cannot ask for a huge allocation.
    let n = usize::try_from(n).map_err(|_| DecodeError::Bad(1))?;
    if n > MAX_VALUES {
        return Err(DecodeError::Bad(1));
    }
    let mut columns = Vec::with_capacity(orders.len());
    for order in orders {
        columns.push(decode_column(&mut r, n, *order)?);
    }
    if r.pos != data.len() {
        return Err(DecodeError::Trailing(data.len() - r.pos));
    }
    Ok(columns)
}

fn encode_column(out: &mut Vec<u8>, values: &[i64], order: Order) {
    let Some(&first) = values.first() else {
        return;
    };
    put_varint(out, zigzag(first));
    if values.len() == 1 {
        return;
    }
    let deltas: Vec<i64> = values.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    let residuals = match order {
        Order::Delta => deltas,
        Order::DeltaOfDelta => {
            put_varint(out, zigzag(deltas[0]));
            deltas.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect()
        }
    };
    let g = residuals.iter().fold(0u64, |g, r| gcd(g, r.unsigned_abs()));
    put_varint(out, g);
    if g == 0 || residuals.is_empty() {
        return;
    }
    let scaled: Vec<u64> = residuals
        .iter()
        .map(|&r| zigzag((i128::from(r) / i128::from(g)) as i64))
        .collect();
    pack(out, &scaled);
}

fn decode_column(reader: &mut Reader<'_>, n: usize, order: Order) -> Result<Vec<i64>, DecodeError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let first = unzigzag(reader.varint()?);
    let mut values = Vec::with_capacity(n);
    values.push(first);
    if n == 1 {
        return Ok(values);
    }
    let first_delta = match order {
        Order::Delta => None,
        Order::DeltaOfDelta => Some(unzigzag(reader.varint()?)),
    };
    let residual_count = match order {
        Order::Delta => n - 1,
        Order::DeltaOfDelta => n - 2,
    };
    let g = reader.varint()?;
    let residuals: Vec<i64> = if g == 0 || residual_count == 0 {
        vec![0; residual_count]
    } else {
        unpack(reader, residual_count)?
            .into_iter()
            .map(|u| unzigzag(u).wrapping_mul(g as i64))
            .collect()
    };
    match first_delta {
        None => {
            let mut v = first;
            for d in residuals {
                v = v.wrapping_add(d);
                values.push(v);
            }
        }
        Some(d0) => {
            let mut d = d0;
            let mut v = first.wrapping_add(d);
            values.push(v);
            for dd in residuals {
                d = d.wrapping_add(dd);
                v = v.wrapping_add(d);
                values.push(v);
            }
        }
    }
    Ok(values)
}

/// Bit-packs `values` at the width that minimises the total size, storing the high bits
/// of wider values as (index delta, high bits) exceptions.
fn pack(out: &mut Vec<u8>, values: &[u64]) {
    let mut by_width = [0usize; 65];
    for &v in values {
        by_width[bit_width(v)] += 1;
    }
    let width = (0..=64usize)
        .min_by_key(|&w| {
            let exceptions: usize = (w + 1..=64)
                .map(|len| by_width[len] * 8 * (1 + (len - w).div_ceil(7)))
                .sum();
            values.len() * w + exceptions
        })
        .unwrap_or(64);
    out.push(width as u8);
    let exceptions: Vec<(usize, u64)> = if width == 64 {
        Vec::new()
    } else {
        values
            .iter()
            .enumerate()
            .filter(|(_, v)| bit_width(**v) > width)
            .map(|(i, v)| (i, v >> width))
            .collect()
    };
    put_varint(out, exceptions.len() as u64);
    let mut last = 0;
    for (i, high) in &exceptions {
        put_varint(out, (i - last) as u64);
        put_varint(out, *high);
        last = *i;
    }
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let mut acc: u128 = 0;
    let mut bits = 0usize;
    for &v in values {
        acc |= u128::from(v & mask) << bits;
        bits += width;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        out.push(acc as u8);
    }
}

fn unpack(r: &mut Reader<'_>, n: usize) -> Result<Vec<u64>, DecodeError> {
    let at = r.pos;
    let width = usize::from(r.byte()?);
    if width > 64 {
        return Err(DecodeError::Bad(at));
    }
    let exception_count = r.varint()?;
    if exception_count > n as u64 {
        return Err(DecodeError::Bad(r.pos));
    }
    let mut exceptions = Vec::with_capacity(exception_count as usize);
    let mut index = 0usize;
    for _ in 0..exception_count {
        let at = r.pos;
        let step = usize::try_from(r.varint()?).map_err(|_| DecodeError::Bad(at))?;
        index = index.checked_add(step).ok_or(DecodeError::Bad(at))?;
        if index >= n || width == 64 {
            return Err(DecodeError::Bad(at));
        }
        exceptions.push((index, r.varint()?));
    }
    let byte_len = (n * width).div_ceil(8);
    let bytes = r.take(byte_len)?;
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let mut values = Vec::with_capacity(n);
    let mut acc: u128 = 0;
    let mut bits = 0usize;
    let mut next = bytes.iter();
    for _ in 0..n {
        while bits < width {
            let b = next.next().copied().unwrap_or(0);
            acc |= u128::from(b) << bits;
            bits += 8;
        }
        values.push((acc as u64) & mask);
        if width > 0 {
            acc >>= width;
            bits -= width;
        }
    }
    for (i, high) in exceptions {
        values[i] |= high << width;
    }
    Ok(values)
}

fn bit_width(v: u64) -> usize {
    (64 - v.leading_zeros()) as usize
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.data.get(self.pos).ok_or(if self.pos == 0 {
            DecodeError::Empty
        } else {
            DecodeError::Truncated(self.pos)
        })?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.data.len())
            .ok_or(DecodeError::Truncated(self.data.len()))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(DecodeError::Bad(start));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Bad(start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(ts: &[i64], vs: &[i64]) -> Vec<Vec<i64>> {
        let data = encode(&[(ts, Order::DeltaOfDelta), (vs, Order::Delta)]);
        decode(&data, &[Order::DeltaOfDelta, Order::Delta]).unwrap()
    }

    #[test]
    fn regular_timestamps_and_coarse_steps_cost_about_half_a_byte_per_sample() {
        let ts: Vec<i64> = (0..900).map(|i| 1_700_000_000_000 + i * 1000).collect();
        // A 0.1 W meter stored at 0.01 W: steps are multiples of 10.
        let vs: Vec<i64> = (0..900).map(|i| 24_000 + (i % 7) * 10).collect();
        let data = encode(&[(&ts, Order::DeltaOfDelta), (&vs, Order::Delta)]);
        // Steps of +10 or -60 are +1 or -6 after the gcd: 4 bits each (450 bytes), timestamps
        // 0 bits, plus about 20 bytes of headers.
        assert!(data.len() <= 480, "{} bytes", data.len());
        assert_eq!(round_trip(&ts, &vs), vec![ts, vs]);
    }

    #[test]
    fn extremes_round_trip() {
        let vs = vec![i64::MIN, i64::MAX, 0, -1, i64::MIN, 1];
        let ts = vec![i64::MAX, i64::MIN, 5, 5, -9, i64::MAX];
        assert_eq!(round_trip(&ts, &vs), vec![ts, vs]);
    }

    #[test]
    fn empty_and_single_round_trip() {
        assert_eq!(round_trip(&[], &[]), vec![Vec::<i64>::new(), vec![]]);
        assert_eq!(round_trip(&[7], &[-3]), vec![vec![7], vec![-3]]);
        assert_eq!(
            round_trip(&[7, 9], &[-3, -3]),
            vec![vec![7, 9], vec![-3, -3]]
        );
    }

    #[test]
    fn corrupt_chunks_are_errors_not_panics() {
        let ts: Vec<i64> = (0..50).map(|i| i * 997).collect();
        let vs: Vec<i64> = (0..50).map(|i| i * i * 31 - 400).collect();
        let data = encode(&[(&ts, Order::DeltaOfDelta), (&vs, Order::Delta)]);
        for cut in 0..data.len() {
            assert!(decode(&data[..cut], &[Order::DeltaOfDelta, Order::Delta]).is_err());
        }
        assert_eq!(decode(&[9], &[Order::Delta]), Err(DecodeError::Version(9)));
        let mut long = data.clone();
        long.push(0);
        assert_eq!(
            decode(&long, &[Order::DeltaOfDelta, Order::Delta]),
            Err(DecodeError::Trailing(1))
        );
    }

    proptest! {
        #[test]
        fn any_columns_round_trip(rows in proptest::collection::vec((any::<i64>(), any::<i64>()), 0..300)) {
            let ts: Vec<i64> = rows.iter().map(|r| r.0).collect();
            let vs: Vec<i64> = rows.iter().map(|r| r.1).collect();
            prop_assert_eq!(round_trip(&ts, &vs), vec![ts, vs]);
        }

        #[test]
        fn sensor_like_columns_round_trip(
            start in -1_000_000_000_000i64..4_000_000_000_000,
            steps in proptest::collection::vec((990i64..1010, -500i64..500), 1..1000),
        ) {
            let mut t = start;
            let mut v = 0i64;
            let (mut ts, mut vs) = (Vec::new(), Vec::new());
            for (dt, dv) in steps {
                t += dt;
                v += dv * 10;
                ts.push(t);
                vs.push(v);
            }
            prop_assert_eq!(round_trip(&ts, &vs), vec![ts, vs]);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes, &[Order::DeltaOfDelta, Order::Delta]);
        }
    }
}
