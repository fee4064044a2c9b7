/* See shim.h: each function forwards to libfabric's static inline of the same name. */
#include "shim.h"

#include <stdlib.h>
#include <string.h>

struct fi_info *gsm_fi_allocinfo(void) { return fi_allocinfo(); }
int gsm_fi_set_prov_name(struct fi_info *info, const char *name)
{
    char *copy = strdup(name);
    if (!copy)
        return -FI_ENOMEM;
    free(info->fabric_attr->prov_name);
    info->fabric_attr->prov_name = copy;
    return 0;
}
int gsm_fi_close(struct fid *fid) { return fi_close(fid); }
int gsm_fi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain)
{
    return fi_domain(fabric, info, domain, NULL);
}
int gsm_fi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep)
{
    return fi_endpoint(domain, info, ep, NULL);
}
int gsm_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq)
{
    return fi_cq_open(domain, attr, cq, NULL);
}
int gsm_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av)
{
    return fi_av_open(domain, attr, av, NULL);
}
int gsm_fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags)
{
    return fi_ep_bind(ep, bfid, flags);
}
int gsm_fi_enable(struct fid_ep *ep) { return fi_enable(ep); }
int gsm_fi_getname(struct fid_ep *ep, void *addr, size_t *addrlen)
{
    return fi_getname(&ep->fid, addr, addrlen);
}
int gsm_fi_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr)
{
    return fi_av_insert(av, addr, count, fi_addr, 0, NULL);
}
int gsm_fi_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access,
                  uint64_t requested_key, struct fid_mr **mr)
{
    return fi_mr_reg(domain, buf, len, access, 0, requested_key, 0, mr, NULL);
}
void *gsm_fi_mr_desc(struct fid_mr *mr) { return fi_mr_desc(mr); }
uint64_t gsm_fi_mr_key(struct fid_mr *mr) { return fi_mr_key(mr); }
int gsm_fi_mr_bind_ep(struct fid_mr *mr, struct fid_ep *ep)
{
    return fi_mr_bind(mr, &ep->fid, 0);
}
int gsm_fi_mr_enable(struct fid_mr *mr) { return fi_mr_enable(mr); }
ssize_t gsm_fi_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                    fi_addr_t dest, void *context)
{
    return fi_send(ep, buf, len, desc, dest, context);
}
ssize_t gsm_fi_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                    void *context)
{
    return fi_recv(ep, buf, len, desc, src, context);
}
ssize_t gsm_fi_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                     fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
    return fi_write(ep, buf, len, desc, dest, addr, key, context);
}
ssize_t gsm_fi_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                         uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
                         void *context)
{
    return fi_writedata(ep, buf, len, desc, data, dest, addr, key, context);
}
ssize_t gsm_fi_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                    uint64_t addr, uint64_t key, void *context)
{
    return fi_read(ep, buf, len, desc, src, addr, key, context);
}
ssize_t gsm_fi_cq_read(struct fid_cq *cq, void *buf, size_t count)
{
    return fi_cq_read(cq, buf, count);
}
ssize_t gsm_fi_cq_sread(struct fid_cq *cq, void *buf, size_t count, const void *cond,
                        int timeout)
{
    return fi_cq_sread(cq, buf, count, cond, timeout);
}
ssize_t gsm_fi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags)
{
    return fi_cq_readerr(cq, buf, flags);
}
const char *gsm_fi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data,
                               char *buf, size_t len)
{
    return fi_cq_strerror(cq, prov_errno, err_data, buf, len);
}
int gsm_fi_cq_getwait_fd(struct fid_cq *cq, int *fd)
{
    return fi_control(&cq->fid, FI_GETWAIT, fd);
}
int gsm_fi_trywait_cq(struct fid_fabric *fabric, struct fid_cq *cq)
{
    struct fid *fids[1] = { &cq->fid };
    return fi_trywait(fabric, fids, 1);
}
ssize_t gsm_fi_fetch_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                            void *result, void *result_desc, fi_addr_t dest, uint64_t addr,
                            uint64_t key, enum fi_datatype datatype, enum fi_op op,
                            void *context)
{
    return fi_fetch_atomic(ep, buf, count, desc, result, result_desc, dest, addr, key, datatype,
                           op, context);
}
ssize_t gsm_fi_compare_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                              const void *compare, void *compare_desc, void *result,
                              void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                              enum fi_datatype datatype, enum fi_op op, void *context)
{
    return fi_compare_atomic(ep, buf, count, desc, compare, compare_desc, result, result_desc,
                             dest, addr, key, datatype, op, context);
}
int gsm_fi_fetch_atomicvalid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
                             size_t *count)
{
    return fi_fetch_atomicvalid(ep, datatype, op, count);
}
int gsm_fi_compare_atomicvalid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
                               size_t *count)
{
    return fi_compare_atomicvalid(ep, datatype, op, count);
}
