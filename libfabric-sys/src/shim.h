/* The libfabric API as real functions: each gsm_fi_* calls the static inline of the same name
 * (minus the prefix), which Rust cannot call directly. */
#ifndef GSM_FABRIC_SHIM_H
#define GSM_FABRIC_SHIM_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>

/* The API version the shim asks fi_getinfo for: 1.17, what Debian 12 ships. */
static const unsigned int GSM_FI_VERSION = FI_VERSION(1, 17);

struct fi_info *gsm_fi_allocinfo(void);
/* Sets info->fabric_attr->prov_name to a malloc'ed copy of name (fi_freeinfo frees it). */
int gsm_fi_set_prov_name(struct fi_info *info, const char *name);
int gsm_fi_close(struct fid *fid);
int gsm_fi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain);
int gsm_fi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep);
int gsm_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq);
int gsm_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av);
int gsm_fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags);
int gsm_fi_enable(struct fid_ep *ep);
int gsm_fi_getname(struct fid_ep *ep, void *addr, size_t *addrlen);
int gsm_fi_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr);
int gsm_fi_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access,
                  uint64_t requested_key, struct fid_mr **mr);
void *gsm_fi_mr_desc(struct fid_mr *mr);
uint64_t gsm_fi_mr_key(struct fid_mr *mr);
int gsm_fi_mr_bind_ep(struct fid_mr *mr, struct fid_ep *ep);
int gsm_fi_mr_enable(struct fid_mr *mr);
ssize_t gsm_fi_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                    fi_addr_t dest, void *context);
ssize_t gsm_fi_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                    void *context);
ssize_t gsm_fi_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                     fi_addr_t dest, uint64_t addr, uint64_t key, void *context);
ssize_t gsm_fi_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                         uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
                         void *context);
ssize_t gsm_fi_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                    uint64_t addr, uint64_t key, void *context);
ssize_t gsm_fi_fetch_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                            void *result, void *result_desc, fi_addr_t dest, uint64_t addr,
                            uint64_t key, enum fi_datatype datatype, enum fi_op op,
                            void *context);
ssize_t gsm_fi_compare_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                              const void *compare, void *compare_desc, void *result,
                              void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                              enum fi_datatype datatype, enum fi_op op, void *context);
/* fi_fetch_atomicvalid: 0 when the endpoint can do op on datatype, with *count the most. */
int gsm_fi_fetch_atomicvalid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
                             size_t *count);
/* fi_compare_atomicvalid: the same for compare atomics (FI_CSWAP). */
int gsm_fi_compare_atomicvalid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
                               size_t *count);
ssize_t gsm_fi_cq_read(struct fid_cq *cq, void *buf, size_t count);
ssize_t gsm_fi_cq_sread(struct fid_cq *cq, void *buf, size_t count, const void *cond,
                        int timeout);
ssize_t gsm_fi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags);
const char *gsm_fi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data,
                               char *buf, size_t len);
int gsm_fi_cq_getwait_fd(struct fid_cq *cq, int *fd);
int gsm_fi_trywait_cq(struct fid_fabric *fabric, struct fid_cq *cq);

#endif
