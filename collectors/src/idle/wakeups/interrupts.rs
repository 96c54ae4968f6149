//! Interrupts per line from `/proc/interrupts` (Documentation/filesystems/proc.rst, "1.2
//! Kernel data", /proc/interrupts; kernel/irq/proc.c `show_interrupts`, arch/x86/kernel/irq.c
//! `arch_show_interrupts`).
//!
//! The header names the CPU columns. A numbered line is one IRQ: a count per CPU (`%10u`,
//! so each wraps at 2^32), then the chip, the hardware IRQ and its trigger type, and after
//! two spaces the names of the handlers (`ahci[0000:00:17.0]`, `nvme0q1`, `i801_smbus,
//! snd_hda_intel`): the device. A named line (`LOC`, `RES`, `CAL`, `TLB`, `NMI`, ...) is one of
//! the kernel's own kinds, a count per CPU and its description (`Local timer interrupts`);
//! `ERR` and `MIS` carry one count and no description.

/// One line of `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptLine {
    /// The line's key: the IRQ number (`128`) or the kernel's name for the kind (`LOC`).
    pub irq: String,
    /// A named line (`LOC`, `RES`, ...): the kernel's own kind, not a device's IRQ.
    pub kernel: bool,
    /// The device (the handlers' names) of an IRQ, or the description of a kernel kind;
    /// empty where the line has none.
    pub name: String,
    /// The count on each CPU column, in order.
    pub per_cpu: Vec<u64>,
}

/// Every line of a `/proc/interrupts` text; lines that do not parse are left out.
pub fn parse(text: &str) -> Vec<InterruptLine> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| {
        h.split_whitespace()
            .filter(|t| t.starts_with("CPU"))
            .count()
    });
    lines.filter_map(|l| parse_line(l, cpus)).collect()
}

fn parse_line(line: &str, cpus: usize) -> Option<InterruptLine> {
    let (key, mut rest) = line.split_once(':')?;
    let irq = key.trim();
    if irq.is_empty() || !irq.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let mut per_cpu = Vec::with_capacity(cpus);
    while per_cpu.len() < cpus.max(1) {
        let trimmed = rest.trim_start();
        let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
        let Ok(n) = trimmed[..end].parse::<u64>() else {
            break;
        };
        per_cpu.push(n);
        rest = &trimmed[end..];
    }
    if per_cpu.is_empty() {
        return None;
    }
    let kernel = !irq.bytes().all(|b| b.is_ascii_digit());
    let name = if kernel {
        rest.trim().to_owned()
    } else {
        device(rest)
    };
    Some(InterruptLine {
        irq: irq.to_owned(),
        kernel,
        name,
        per_cpu,
    })
}

/// The handlers' names of an IRQ line, after its counts: the last of the columns separated
/// by two spaces or more (the kernel prints two before the first handler), unless that is
/// the chip or the trigger column itself (an IRQ with no handler).
fn device(rest: &str) -> String {
    let columns: Vec<&str> = rest
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    match columns.as_slice() {
        [_, .., last] if !is_trigger(last) => (*last).to_owned(),
        _ => String::new(),
    }
}

/// `2-edge`, `327680-edge`, `27 Level`, `Edge`: the hardware IRQ and trigger columns.
fn is_trigger(column: &str) -> bool {
    let last = column
        .rsplit(['-', ' '])
        .next()
        .unwrap_or(column)
        .to_ascii_lowercase();
    ["edge", "level", "fasteoi"].contains(&last.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An x86 desktop's lines (Linux 6.1), a KVM guest's, and an arm64 board's (GICv3, with
    /// the trigger printed as a word of its own).
    const TEXT: &str = "           CPU0       CPU1       CPU2       CPU3       
  0:         36          0          0          0   IO-APIC    2-edge      timer
  8:          0          1          0          0   IO-APIC    8-edge      rtc0
  9:          0        120          0          0   IO-APIC    9-fasteoi   acpi
 16:          0          0          0          0   IO-APIC   16-fasteoi   i801_smbus, snd_hda_intel:card0
 28:          0          0          0          0 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config
122:          0          0    1048576          0  IR-PCI-MSIX-0000:01:00.0    1-edge      nvme0q1
125:          5          0          0          0  IR-PCI-MSI 327680-edge      xhci_hcd
 11:          7          0          0          0     GICv3  27 Level     arch_timer
 40:          0          0          0          0   IO-APIC   40-edge
NMI:          0          0          0          0   Non-maskable interrupts
LOC:    1214986    1234655    1000000    1000000   Local timer interrupts
RES:     273802     175592          0          0   Rescheduling interrupts
TLB:     382307     379138          0          0   TLB shootdowns
ERR:          0
MIS:          0
";

    #[test]
    fn devices_and_kernel_kinds_are_named() {
        let lines = parse(TEXT);
        let find = |irq: &str| lines.iter().find(|l| l.irq == irq).unwrap();
        assert_eq!(find("0").name, "timer");
        assert_eq!(find("9").per_cpu, [0, 120, 0, 0]);
        assert_eq!(find("16").name, "i801_smbus, snd_hda_intel:card0");
        assert_eq!(find("28").name, "virtio0-config");
        assert_eq!(find("122").name, "nvme0q1");
        assert_eq!(find("122").per_cpu.iter().sum::<u64>(), 1_048_576);
        assert_eq!(find("125").name, "xhci_hcd");
        assert_eq!(find("11").name, "arch_timer");
        // No handler: nothing to name, never the trigger column.
        assert_eq!(find("40").name, "");
        let loc = find("LOC");
        assert!(loc.kernel && !find("0").kernel);
        assert_eq!(loc.name, "Local timer interrupts");
        assert_eq!(loc.per_cpu.len(), 4);
        assert_eq!(find("ERR").per_cpu, [0]);
        assert_eq!(find("ERR").name, "");
    }

    #[test]
    fn garbage_lines_are_left_out() {
        let lines =
            parse("  CPU0\n\nno colon here\n x y: 1 a\nLOC: abc\n 3: 7 IO-APIC 3-edge  dev\n");
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].irq, "3");
        assert_eq!(lines[0].name, "dev");
    }
}
