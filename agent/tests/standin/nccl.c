/* A stand-in for libnccl.so: NCCL's real symbol names and signatures, doing nothing. */
#include <stddef.h>

typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct ncclComm *ncclComm_t;
typedef struct CUstream_st *cudaStream_t;

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)op; (void)comm; (void)stream;
  return 0;
}
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff; (void)recvbuff; (void)sendcount; (void)datatype; (void)comm; (void)stream;
  return 0;
}
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff; (void)recvbuff; (void)recvcount; (void)datatype; (void)op; (void)comm; (void)stream;
  return 0;
}
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)root; (void)comm; (void)stream;
  return 0;
}
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff; (void)count; (void)datatype; (void)peer; (void)comm; (void)stream;
  return 0;
}
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  (void)recvbuff; (void)count; (void)datatype; (void)peer; (void)comm; (void)stream;
  return 0;
}
