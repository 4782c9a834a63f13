/*
 * A stand-in for libnvidia-ml.so.1 exporting the NVML entry points the MCJS HAL calls, with
 * NVML's signatures, struct layouts and return codes. What it reports comes from a text file:
 * the path in $FAKE_NVML_CONFIG, else the library's own path with ".conf" appended (so several
 * copies with different configurations can be loaded by one process).
 *
 * Configuration, one "key value" per line; "gpu" starts a device; '#' starts a comment:
 *   init_error 9                    nvmlInit_v2 fails with this code
 *   driver 470.256.02               cuda 11040
 *   gpu
 *   name Tesla K80                  uuid GPU-...              memory_mib 12288
 *   cc 3 7                          pci 00000000:04:00.0      pci_device_id 0x102d10de
 *   temperature 41                  power_mw 149000           ecc 1
 *   ecc_uncorrected_volatile 0      ecc_uncorrected_aggregate 2
 *   ecc_corrected_volatile 5        mig 0
 *   attestation_report PATH         attestation_chain PATH
 * The attestation files are a report as hex and its certificate chain as PEM: the fake hands
 * them out whatever nonce it is asked for, as a node replaying a genuine card's report would.
 * An optional key left out makes its query answer NVML_ERROR_NOT_SUPPORTED, as real drivers
 * do for boards without the feature.
 *
 * Build variants (-D):
 *   FAKE_NVML_R470         no nvmlDeviceGetMemoryInfo_v2 (absent from drivers of that branch)
 *   FAKE_NVML_NO_SHUTDOWN  no nvmlShutdown
 *   FAKE_NVML_NO_INIT      no nvmlInit_v2
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_UNKNOWN 999
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

#define MAX_GPUS 16
#define UNSET -1LL

struct fake_gpu {
    char name[96];
    char uuid[96];
    char pci[32];
    long long memory_mib, cc_major, cc_minor, pci_device_id, temperature, power_mw, ecc;
    long long ecc_uncorrected_volatile, ecc_uncorrected_aggregate, ecc_corrected_volatile, mig;
    char attestation_report[1024];
    char attestation_chain[1024];
};
typedef struct fake_gpu *nvmlDevice_t;

static struct fake_gpu gpus[MAX_GPUS];
static unsigned int gpu_count;
static char driver[80] = "0.0";
static long long cuda = UNSET, init_error = UNSET;
static int initialised;

static void reset_gpu(struct fake_gpu *g) {
    memset(g, 0, sizeof *g);
    g->memory_mib = g->cc_major = g->cc_minor = g->pci_device_id = UNSET;
    g->temperature = g->power_mw = g->ecc = UNSET;
    g->ecc_uncorrected_volatile = g->ecc_uncorrected_aggregate = g->ecc_corrected_volatile = UNSET;
    g->mig = UNSET;
}

static void copy_value(char *dst, size_t cap, const char *src) {
    snprintf(dst, cap, "%s", src);
}

__attribute__((unused)) static int load_config(void) {
    char path[4096];
    const char *env = getenv("FAKE_NVML_CONFIG");
    if (env && *env) {
        copy_value(path, sizeof path, env);
    } else {
        Dl_info info;
        if (!dladdr((void *)load_config, &info) || !info.dli_fname) return -1;
        snprintf(path, sizeof path, "%s.conf", info.dli_fname);
    }
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    gpu_count = 0;
    char line[512];
    struct fake_gpu *g = NULL;
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        line[strcspn(line, "\r\n")] = 0;
        char *key = line + strspn(line, " \t");
        if (!*key) continue;
        char *value = key + strcspn(key, " \t");
        if (*value) *value++ = 0;
        value += strspn(value, " \t");
        char *end = value + strlen(value);
        while (end > value && (end[-1] == ' ' || end[-1] == '\t')) *--end = 0;

        if (!strcmp(key, "gpu")) {
            if (gpu_count == MAX_GPUS) break;
            g = &gpus[gpu_count++];
            reset_gpu(g);
        } else if (!strcmp(key, "driver")) copy_value(driver, sizeof driver, value);
        else if (!strcmp(key, "cuda")) cuda = strtoll(value, NULL, 0);
        else if (!strcmp(key, "init_error")) init_error = strtoll(value, NULL, 0);
        else if (!g) continue;
        else if (!strcmp(key, "name")) copy_value(g->name, sizeof g->name, value);
        else if (!strcmp(key, "uuid")) copy_value(g->uuid, sizeof g->uuid, value);
        else if (!strcmp(key, "pci")) copy_value(g->pci, sizeof g->pci, value);
        else if (!strcmp(key, "memory_mib")) g->memory_mib = strtoll(value, NULL, 0);
        else if (!strcmp(key, "cc")) sscanf(value, "%lld %lld", &g->cc_major, &g->cc_minor);
        else if (!strcmp(key, "pci_device_id")) g->pci_device_id = strtoll(value, NULL, 0);
        else if (!strcmp(key, "temperature")) g->temperature = strtoll(value, NULL, 0);
        else if (!strcmp(key, "power_mw")) g->power_mw = strtoll(value, NULL, 0);
        else if (!strcmp(key, "ecc")) g->ecc = strtoll(value, NULL, 0);
        else if (!strcmp(key, "ecc_uncorrected_volatile")) g->ecc_uncorrected_volatile = strtoll(value, NULL, 0);
        else if (!strcmp(key, "ecc_uncorrected_aggregate")) g->ecc_uncorrected_aggregate = strtoll(value, NULL, 0);
        else if (!strcmp(key, "ecc_corrected_volatile")) g->ecc_corrected_volatile = strtoll(value, NULL, 0);
        else if (!strcmp(key, "mig")) g->mig = strtoll(value, NULL, 0);
        else if (!strcmp(key, "attestation_report"))
            copy_value(g->attestation_report, sizeof g->attestation_report, value);
        else if (!strcmp(key, "attestation_chain"))
            copy_value(g->attestation_chain, sizeof g->attestation_chain, value);
    }
    fclose(f);
    return 0;
}

static nvmlReturn_t check_device(nvmlDevice_t d) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (d < gpus || d >= gpus + gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_INIT
nvmlReturn_t nvmlInit_v2(void) {
    if (load_config() != 0) return NVML_ERROR_UNKNOWN;
    if (init_error != UNSET) return (nvmlReturn_t)init_error;
    initialised = 1;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_NO_SHUTDOWN
nvmlReturn_t nvmlShutdown(void) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    initialised = 0;
    return NVML_SUCCESS;
}
#endif

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, driver);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!version) return NVML_ERROR_INVALID_ARGUMENT;
    if (cuda == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    *version = (int)cuda;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = gpu_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    nvmlReturn_t r = check_device(d);
    return r ? r : copy_string(name, length, d->name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!d->uuid[0]) return NVML_ERROR_NOT_SUPPORTED;
    return copy_string(uuid, length, d->uuid);
}

/* Reported as real boards do: the driver reserves a little, the rest is used + free. */
static void fill_memory(nvmlDevice_t d, unsigned long long *total, unsigned long long *used,
                        unsigned long long *free_) {
    *total = (unsigned long long)d->memory_mib << 20;
    *used = 5ULL << 20;
    *free_ = *total - *used;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *memory) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->memory_mib == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    fill_memory(d, &memory->total, &memory->used, &memory->free);
    return NVML_SUCCESS;
}

#ifndef FAKE_NVML_R470
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *memory) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != (unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (d->memory_mib == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    fill_memory(d, &memory->total, &memory->used, &memory->free);
    memory->reserved = 0;
    return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->cc_major == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    *major = (int)d->cc_major;
    *minor = (int)d->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    copy_value(pci->busId, sizeof pci->busId, d->pci);
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    sscanf(d->pci, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.%x", domain & 0xffff, bus, dev, fn);
    pci->pciDeviceId = d->pci_device_id == UNSET ? 0 : (unsigned int)d->pci_device_id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!temp || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->temperature == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    *temp = (unsigned int)d->temperature;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *limit) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->power_mw == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    *limit = (unsigned int)d->power_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *limit) {
    return nvmlDeviceGetEnforcedPowerLimit(d, limit);
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int *current, int *pending) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->ecc == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = d->ecc ? 1 : 0;
    return NVML_SUCCESS;
}

/* errorType: 0 corrected, 1 uncorrected; counterType: 0 volatile, 1 aggregate. */
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int errorType, int counterType,
                                         unsigned long long *count) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!count || errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d->ecc != 1) return NVML_ERROR_NOT_SUPPORTED;
    long long v;
    if (errorType == 1)
        v = counterType == 0 ? d->ecc_uncorrected_volatile : d->ecc_uncorrected_aggregate;
    else
        v = counterType == 0 ? d->ecc_corrected_volatile : UNSET;
    if (v == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    *count = (unsigned long long)v;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->mig == UNSET) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned int)d->mig;
    return NVML_SUCCESS;
}

typedef struct {
    unsigned int isCecAttestationReportPresent;
    unsigned int attestationReportSize;
    unsigned int cecAttestationReportSize;
    unsigned char nonce[32];
    unsigned char attestationReport[8192];
    unsigned char cecAttestationReport[4096];
} nvmlConfComputeGpuAttestationReport_t;

typedef struct {
    unsigned int certChainSize;
    unsigned int attestationCertChainSize;
    unsigned char certChain[4096];
    unsigned char attestationCertChain[5120];
} nvmlConfComputeGpuCertificate_t;

/* Reads at most `cap` bytes of `path` into `out`; returns the count, or -1. */
static long read_file(const char *path, unsigned char *out, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(out, 1, cap, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    return more ? -1 : (long)n;
}

nvmlReturn_t nvmlDeviceGetConfComputeGpuAttestationReport(nvmlDevice_t d,
                                                          nvmlConfComputeGpuAttestationReport_t *report) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!report) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->attestation_report[0]) return NVML_ERROR_NOT_SUPPORTED;
    static unsigned char hex[2 * 8192 + 2];
    long n = read_file(d->attestation_report, hex, sizeof hex - 1);
    if (n < 0) return NVML_ERROR_UNKNOWN;
    while (n > 0 && (hex[n - 1] == '\n' || hex[n - 1] == ' ')) n--;
    if (n % 2 || n / 2 > (long)sizeof report->attestationReport) return NVML_ERROR_UNKNOWN;
    for (long i = 0; i < n / 2; i++) {
        unsigned int byte;
        if (sscanf((const char *)hex + 2 * i, "%2x", &byte) != 1) return NVML_ERROR_UNKNOWN;
        report->attestationReport[i] = (unsigned char)byte;
    }
    report->attestationReportSize = (unsigned int)(n / 2);
    report->isCecAttestationReportPresent = 0;
    report->cecAttestationReportSize = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetConfComputeGpuCertificate(nvmlDevice_t d,
                                                    nvmlConfComputeGpuCertificate_t *cert) {
    nvmlReturn_t r = check_device(d);
    if (r) return r;
    if (!cert) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->attestation_chain[0]) return NVML_ERROR_NOT_SUPPORTED;
    long n = read_file(d->attestation_chain, cert->attestationCertChain,
                       sizeof cert->attestationCertChain);
    if (n < 0) return NVML_ERROR_UNKNOWN;
    cert->attestationCertChainSize = (unsigned int)n;
    cert->certChainSize = 0;
    return NVML_SUCCESS;
}
