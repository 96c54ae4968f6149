//! The host away, for the standby tests: the kernel saying the host slept longer than it
//! did (a time namespace). A meter whose counter moved on meanwhile is
//! [`crate::simulate_counted`].

use std::process::Command;

/// Runs `cmd` in a new time namespace whose `CLOCK_BOOTTIME` is `slept_s` ahead of the
/// host's and whose `CLOCK_MONOTONIC` is the host's: to the process, the kernel says the
/// host slept `slept_s` more than it did (the kernel's own fake clock; needs Linux 5.6 and
/// CAP_SYS_ADMIN, which the suite's tmpfs mounts need too).
#[allow(unsafe_code)]
pub fn with_more_sleep(cmd: &mut Command, slept_s: u32) {
    use std::os::unix::process::CommandExt as _;
    let offsets = format!("boottime {slept_s} 0\n").into_bytes();
    // SAFETY: the hook runs in the forked child before exec and only makes system calls on
    // buffers made before the fork (no allocation, no locks).
    unsafe {
        cmd.pre_exec(move || {
            let fail = |what: &str| {
                let e = std::io::Error::last_os_error();
                std::io::Error::new(e.kind(), format!("{what}: {e}"))
            };
            if libc::unshare(libc::CLONE_NEWTIME) != 0 {
                return Err(fail("unshare(CLONE_NEWTIME)"));
            }
            let fd = libc::open(c"/proc/self/timens_offsets".as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(fail("opening /proc/self/timens_offsets"));
            }
            let written = libc::write(fd, offsets.as_ptr().cast(), offsets.len());
            libc::close(fd);
            if written != offsets.len() as isize {
                return Err(fail("writing the time offsets"));
            }
            let ns = libc::open(c"/proc/self/ns/time_for_children".as_ptr(), libc::O_RDONLY);
            if ns < 0 {
                return Err(fail("opening the new time namespace"));
            }
            let entered = libc::setns(ns, libc::CLONE_NEWTIME);
            libc::close(ns);
            if entered != 0 {
                return Err(fail("entering the new time namespace"));
            }
            Ok(())
        });
    }
}
