//! Running scripts/vm from a test: the guest script's output and exit status, or a skip
//! when (and only when) ZONESTACK_VM_SKIP=1 and QEMU cannot run on this machine.

use std::path::PathBuf;
use std::process::Command;

/// What a VM run returned.
pub struct VmRun {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The repository's scripts/vm.
pub fn vm_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/vm")
}

/// Boots the VM with `args` and `script` as the guest script; None when the harness says skip
/// (exit 77, which it returns only under ZONESTACK_VM_SKIP=1).
pub fn run_vm(args: &[&str], script: &str) -> Option<VmRun> {
    let dir = std::env::temp_dir().join(format!("zonestack-vm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script_path = dir.join(format!("guest-{}.sh", args.len()));
    std::fs::write(&script_path, script).expect("write guest script");
    let out = Command::new("bash")
        .arg(vm_script())
        .args(args)
        .arg(&script_path)
        .output()
        .expect("cannot run scripts/vm");
    std::fs::remove_dir_all(&dir).ok();
    let run = VmRun {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    if run.status == 77 {
        eprintln!("SKIPPED (ZONESTACK_VM_SKIP=1): {}", run.stderr.trim());
        return None;
    }
    assert!(
        run.status != 125 && run.status != 124,
        "scripts/vm could not run the guest (exit {}): {}\n{}",
        run.status,
        run.stderr,
        run.stdout
    );
    Some(run)
}
