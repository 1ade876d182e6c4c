"""Integration tests of the shared kube/ adapters against the real local kube-apiserver + etcd."""
