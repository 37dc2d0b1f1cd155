//! What the upload tests over the fake kernel module share: a CUDA call's
//! success, and how many syncs reached the submit actor. Shared by path
//! (each test file is its own crate and process).

use cudart::CudaError;

pub fn ok(e: CudaError) {
    assert_eq!(e, CudaError::SUCCESS, "{e}");
}

/// Syncs the submit actor took, through its mailbox or as sync points.
pub fn syncs() -> u64 {
    let rt = cudart::runtime::started().unwrap();
    let mailbox = rt
        .actor_snapshots()
        .into_iter()
        .find(|a| a.name == "submit")
        .and_then(|a| a.per_kind.get("synchronize").copied())
        .unwrap_or(0);
    mailbox + rt.call(|st| st.submit.stats()).unwrap().caller_syncs
}
