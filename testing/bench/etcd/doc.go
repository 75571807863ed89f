// Command etcd-bench runs etcd beside outpost in `make bench`, so that the
// write benchmark's "vs etcd" column is measured in the same run on the same
// machine rather than copied from an earlier one.
//
// It is a module of its own (this directory's go.mod) so that etcd and its
// dependencies never enter outpost's go.mod or binary. `make bin/etcd-bench`
// builds it from the Go module proxy:
//
//	cd testing/bench/etcd && go build -o ../../../bin/etcd-bench .
//
// Subcommands:
//
//	etcd-bench serve [etcd flags]   one etcd member (etcdmain, as the etcd binary)
//	etcd-bench run -levels 1,16,64,256 -duration 10s
//	    starts 3 members on loopback (fsync on, as etcd always does; TLS on
//	    client and peer ports with self-signed certificates, as outpost's
//	    HTTPS API and raft port), drives create-if-absent of 1 KiB values
//	    (a transaction: put if the key's create revision is 0) from N
//	    concurrent clients on the leader's endpoint, and prints one JSON
//	    object per level on stdout.
package main
