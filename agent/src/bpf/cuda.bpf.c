// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// slurmlens-agent's uprobes on the CUDA runtime and NCCL: counts, bytes and host-side time per
// (cgroup, process, GPU, category, name), summed in a bounded hash map that user space reads every
// interval. Host-side only: a kernel launch is counted where it is enqueued, never timed on the GPU.
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

typedef unsigned long long u64;
typedef unsigned int u32;

// Categories, as user space maps them to the server's words.
#define CAT_KERNEL 1
#define CAT_MEMCPY 2
#define CAT_SYNC 3
#define CAT_NCCL 4

// Pending entry→return slots per thread (calls of different kinds may nest).
#define SLOT_MEMCPY 0
#define SLOT_SYNC 1
#define SLOT_NCCL 2
#define SLOT_SETDEVICE 3

struct key {
	u64 cgroup;
	u32 pid;
	u32 gpu;
	u32 category;
	// Which half of the interval's double buffer (see `epoch`).
	u32 epoch;
	// The kernel's host stub address, the memcpy kind, the sync call or the NCCL operation.
	u64 name;
};

struct value {
	u64 count;
	u64 total_ns;
	u64 max_ns;
	u64 bytes;
};

struct pending {
	u64 start_ns;
	u64 bytes;
	u64 name;
	u32 category;
	u32 device;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct key);
	__type(value, struct value);
} stats SEC(".maps");

// The current device per thread (cudaSetDevice); a thread that never set one uses device 0.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u32);
} device SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct pending);
} pending SEC(".maps");

// [0]: the epoch new events go to. User space flips it at the end of an interval, then reads and
// deletes the other epoch's entries: each interval's counts, sums and maxima are its own.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} epoch SEC(".maps");

// [0]: summaries lost because `stats` was full.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} dropped SEC(".maps");

static __always_inline u32 current_device(u32 tid)
{
	u32 *gpu = bpf_map_lookup_elem(&device, &tid);
	return gpu ? *gpu : 0;
}

static __always_inline void add(u32 category, u64 name, u64 ns, u64 bytes)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 at = 0;
	u32 *current = bpf_map_lookup_elem(&epoch, &at);
	struct key key = {
		.epoch = current ? *current : 0,
		.cgroup = bpf_get_current_cgroup_id(),
		.pid = id >> 32,
		.gpu = current_device((u32)id),
		.category = category,
		.name = name,
	};
	struct value *value = bpf_map_lookup_elem(&stats, &key);
	if (!value) {
		struct value zero = {};
		if (bpf_map_update_elem(&stats, &key, &zero, BPF_NOEXIST) && bpf_map_lookup_elem(&stats, &key) == 0) {
			u64 *lost = bpf_map_lookup_elem(&dropped, &at);
			if (lost)
				__sync_fetch_and_add(lost, 1);
			return;
		}
		value = bpf_map_lookup_elem(&stats, &key);
		if (!value)
			return;
	}
	__sync_fetch_and_add(&value->count, 1);
	__sync_fetch_and_add(&value->total_ns, ns);
	__sync_fetch_and_add(&value->bytes, bytes);
	if (ns > value->max_ns)
		value->max_ns = ns;
}

static __always_inline void begin(u32 slot, u32 category, u64 name, u64 bytes)
{
	u64 tid = (u32)bpf_get_current_pid_tgid();
	u64 at = tid << 8 | slot;
	struct pending entry = {
		.start_ns = bpf_ktime_get_ns(),
		.bytes = bytes,
		.name = name,
		.category = category,
	};
	bpf_map_update_elem(&pending, &at, &entry, BPF_ANY);
}

static __always_inline void end(u32 slot)
{
	u64 tid = (u32)bpf_get_current_pid_tgid();
	u64 at = tid << 8 | slot;
	struct pending *entry = bpf_map_lookup_elem(&pending, &at);
	if (!entry)
		return;
	add(entry->category, entry->name, bpf_ktime_get_ns() - entry->start_ns, entry->bytes);
	bpf_map_delete_elem(&pending, &at);
}

// cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t s):
// counted per host stub (func), named in user space from the executable's symbols.
SEC("uprobe")
int BPF_KPROBE(launch_kernel, const void *func)
{
	add(CAT_KERNEL, (u64)func, 0, 0);
	return 0;
}

// cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind): synchronous, timed.
SEC("uprobe")
int BPF_KPROBE(memcpy_enter, void *dst, const void *src, u64 count, int kind)
{
	begin(SLOT_MEMCPY, CAT_MEMCPY, (u64)kind, count);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(memcpy_exit)
{
	end(SLOT_MEMCPY);
	return 0;
}

// cudaMemcpyAsync(dst, src, count, kind, stream): bytes and count; its host time is not the copy's.
SEC("uprobe")
int BPF_KPROBE(memcpy_async, void *dst, const void *src, u64 count, int kind)
{
	add(CAT_MEMCPY, (u64)kind, 0, count);
	return 0;
}

// The synchronisation calls: the cookie set at attach time names which one (1 device, 2 stream, 3 event).
SEC("uprobe")
int BPF_KPROBE(sync_enter)
{
	begin(SLOT_SYNC, CAT_SYNC, bpf_get_attach_cookie(ctx), 0);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(sync_exit)
{
	end(SLOT_SYNC);
	return 0;
}

// cudaSetDevice(int device): the thread's device once the call succeeded.
SEC("uprobe")
int BPF_KPROBE(set_device_enter, int gpu)
{
	u64 tid = (u32)bpf_get_current_pid_tgid();
	u64 at = tid << 8 | SLOT_SETDEVICE;
	struct pending entry = { .device = (u32)gpu };
	bpf_map_update_elem(&pending, &at, &entry, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(set_device_exit, int ret)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u64 at = (u64)tid << 8 | SLOT_SETDEVICE;
	struct pending *entry = bpf_map_lookup_elem(&pending, &at);
	if (!entry)
		return 0;
	if (ret == 0) {
		u32 gpu = entry->device;
		bpf_map_update_elem(&device, &tid, &gpu, BPF_ANY);
	}
	bpf_map_delete_elem(&pending, &at);
	return 0;
}

// ncclDataType_t sizes: Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64, Bfloat16,
// Float8e4m3, Float8e5m2.
static __always_inline u64 nccl_size(int datatype)
{
	switch (datatype) {
	case 0: case 1: case 10: case 11: return 1;
	case 6: case 9: return 2;
	case 2: case 3: case 7: return 4;
	case 4: case 5: case 8: return 8;
	default: return 0;
	}
}

// Collectives with (sendbuff, recvbuff, count, datatype, …): AllReduce, AllGather, ReduceScatter,
// Broadcast, Reduce, AllToAll. The cookie is the operation's number in user space's table.
SEC("uprobe")
int BPF_KPROBE(nccl_collective, const void *send, void *recv, u64 count, int datatype)
{
	begin(SLOT_NCCL, CAT_NCCL, bpf_get_attach_cookie(ctx), count * nccl_size(datatype));
	return 0;
}

// Point-to-point with (buff, count, datatype, peer, …): Send, Recv.
SEC("uprobe")
int BPF_KPROBE(nccl_p2p, void *buff, u64 count, int datatype)
{
	begin(SLOT_NCCL, CAT_NCCL, bpf_get_attach_cookie(ctx), count * nccl_size(datatype));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(nccl_exit)
{
	end(SLOT_NCCL);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
