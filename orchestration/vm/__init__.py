"""Real virtual machines on this machine: the cloud image of scripts/build-cloud-image booted
under QEMU (software emulation, user networking restricted to forwarded host ports), for tests
that need a guest which really boots and runs its cloud-init user data. Stdlib only."""

from __future__ import annotations

from orchestration.vm.qemu import GUEST_HOST_ADDRESS, BaseImage, Vm, VmError, VmFiles, boot

__all__ = ["GUEST_HOST_ADDRESS", "BaseImage", "Vm", "VmError", "VmFiles", "boot"]
