/* The mirror server and publisher (hubkern serve / hubkern publish). */
#ifndef HK_SERVER_H
#define HK_SERVER_H
#endif
