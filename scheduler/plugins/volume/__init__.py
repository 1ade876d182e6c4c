"""kube-scheduler v1.20.2's volume plugins (docs/rules/scheduler-volumes.md): VolumeRestrictions,
VolumeZone, NodeVolumeLimits with the in-tree EBS/GCEPD/AzureDisk/Cinder limits, and VolumeBinding.
They read storage objects from scheduler.framework.volumes.VolumeObjects."""
