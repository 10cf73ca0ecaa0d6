/* build_id.c — the NT_GNU_BUILD_ID note of the loaded object containing this function,
 * found through dl_iterate_phdr (build_id.h). Read once. */
#include <elf.h>
#include <stdbool.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/build_id.h"

static char id_hex[2 * 64 + 1];

/* Notes are a name size, a descriptor size, a type, the name and the descriptor, each
 * padded to 4 bytes. */
static bool find_note(const char *p, size_t size)
{
    const char *end = p + size;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
        const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
        const char *name = p + sizeof *nh;
        const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
        if ((const char *)desc + nh->n_descsz > end)
            return false;
        if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
            nh->n_descsz > 0 && nh->n_descsz <= 64) {
            for (unsigned i = 0; i < nh->n_descsz; i++)
                snprintf(id_hex + 2 * i, 3, "%02x", desc[i]);
            return true;
        }
        p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
    }
    return false;
}

/* dl_iterate_phdr's callback: stop (1) at the object whose loaded segments hold `data`. */
static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t here = (uintptr_t)data;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        mine = ph->p_type == PT_LOAD && here >= start && here < start + ph->p_memsz;
    }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE &&
            find_note((const char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz))
            break;
    }
    return 1;
}

static void read_id(void) { dl_iterate_phdr(visit, (void *)(uintptr_t)&read_id); }

const char *build_id(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_id);
    return id_hex[0] ? id_hex : NULL;
}
