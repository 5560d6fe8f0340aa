"""Kueue's ``kueue.x-k8s.io/v1beta2`` schemas for ResourceFlavor, ClusterQueue and LocalQueue.

Generated, not written: the ``openAPIV3Schema`` of the ``v1beta2`` version (served, and the
storage version) in kubernetes-sigs/kueue ``config/components/crd/bases/kueue.x-k8s.io_{clusterqueues,
localqueues,resourceflavors}.yaml`` at commit ff69552e79ad21652c36caa97038382e55625cf7
(2026-08-22), with ``status`` and every ``description`` left out. :func:`course.k8s.validate`
checks Kueue manifests against it, strictly (a field the schema does not name is an error, as
the API server's strict field validation makes it).
"""

import json

SCHEMAS = json.loads(r"""
{
 "ClusterQueue": {
  "properties": {
   "apiVersion": {
    "type": "string"
   },
   "kind": {
    "type": "string"
   },
   "metadata": {
    "type": "object"
   },
   "spec": {
    "properties": {
     "admissionChecksStrategy": {
      "properties": {
       "admissionChecks": {
        "items": {
         "properties": {
          "name": {
           "maxLength": 316,
           "minLength": 1,
           "type": "string"
          },
          "onFlavors": {
           "items": {
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "type": "string"
           },
           "maxItems": 64,
           "type": "array",
           "x-kubernetes-list-type": "set"
          }
         },
         "required": [
          "name"
         ],
         "type": "object"
        },
        "maxItems": 64,
        "minItems": 1,
        "type": "array",
        "x-kubernetes-list-map-keys": [
         "name"
        ],
        "x-kubernetes-list-type": "map"
       }
      },
      "required": [
       "admissionChecks"
      ],
      "type": "object"
     },
     "admissionScope": {
      "properties": {
       "admissionMode": {
        "enum": [
         "UsageBasedAdmissionFairSharing",
         "NoAdmissionFairSharing"
        ],
        "type": "string"
       }
      },
      "required": [
       "admissionMode"
      ],
      "type": "object"
     },
     "cohortName": {
      "maxLength": 253,
      "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
      "type": "string"
     },
     "concurrentAdmissionPolicy": {
      "properties": {
       "migration": {
        "properties": {
         "constraints": {
          "properties": {
           "lastAcceptableFlavorName": {
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "type": "string"
           }
          },
          "type": "object"
         },
         "mode": {
          "enum": [
           "TryPreferredFlavors",
           "RetainFirstAdmission"
          ],
          "maxLength": 253,
          "type": "string"
         }
        },
        "required": [
         "mode"
        ],
        "type": "object"
       }
      },
      "required": [
       "migration"
      ],
      "type": "object"
     },
     "fairSharing": {
      "properties": {
       "weight": {
        "anyOf": [
         {
          "type": "integer"
         },
         {
          "type": "string"
         }
        ],
        "default": 1,
        "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
        "x-kubernetes-int-or-string": true
       }
      },
      "type": "object"
     },
     "flavorFungibility": {
      "default": {},
      "properties": {
       "preference": {
        "enum": [
         "BorrowingOverPreemption",
         "PreemptionOverBorrowing"
        ],
        "type": "string"
       },
       "whenCanBorrow": {
        "default": "MayStopSearch",
        "enum": [
         "MayStopSearch",
         "TryNextFlavor"
        ],
        "type": "string"
       },
       "whenCanPreempt": {
        "default": "TryNextFlavor",
        "enum": [
         "MayStopSearch",
         "TryNextFlavor"
        ],
        "type": "string"
       }
      },
      "type": "object",
      "x-kubernetes-validations": [
       {
        "message": "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
        "rule": "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')"
       }
      ]
     },
     "namespaceSelector": {
      "properties": {
       "matchExpressions": {
        "items": {
         "properties": {
          "key": {
           "type": "string"
          },
          "operator": {
           "type": "string"
          },
          "values": {
           "items": {
            "type": "string"
           },
           "type": "array",
           "x-kubernetes-list-type": "atomic"
          }
         },
         "required": [
          "key",
          "operator"
         ],
         "type": "object"
        },
        "type": "array",
        "x-kubernetes-list-type": "atomic"
       },
       "matchLabels": {
        "additionalProperties": {
         "type": "string"
        },
        "type": "object"
       }
      },
      "type": "object",
      "x-kubernetes-map-type": "atomic"
     },
     "preemption": {
      "default": {},
      "properties": {
       "borrowWithinCohort": {
        "default": {},
        "properties": {
         "maxPriorityThreshold": {
          "format": "int32",
          "type": "integer"
         },
         "policy": {
          "default": "Never",
          "enum": [
           "Never",
           "LowerPriority"
          ],
          "type": "string"
         }
        },
        "type": "object"
       },
       "reclaimWithinCohort": {
        "default": "Never",
        "enum": [
         "Never",
         "LowerPriority",
         "Any"
        ],
        "type": "string"
       },
       "withinClusterQueue": {
        "default": "Never",
        "enum": [
         "Never",
         "LowerPriority",
         "LowerOrNewerEqualPriority"
        ],
        "type": "string"
       }
      },
      "type": "object",
      "x-kubernetes-validations": [
       {
        "message": "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        "rule": "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  self.borrowWithinCohort.policy != 'Never')"
       }
      ]
     },
     "queueingStrategy": {
      "default": "BestEffortFIFO",
      "enum": [
       "StrictFIFO",
       "BestEffortFIFO"
      ],
      "type": "string"
     },
     "resourceGroups": {
      "items": {
       "properties": {
        "coveredResources": {
         "items": {
          "type": "string"
         },
         "maxItems": 64,
         "minItems": 1,
         "type": "array",
         "x-kubernetes-list-type": "atomic"
        },
        "flavors": {
         "items": {
          "properties": {
           "name": {
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "type": "string"
           },
           "resources": {
            "items": {
             "properties": {
              "borrowingLimit": {
               "anyOf": [
                {
                 "type": "integer"
                },
                {
                 "type": "string"
                }
               ],
               "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
               "x-kubernetes-int-or-string": true
              },
              "lendingLimit": {
               "anyOf": [
                {
                 "type": "integer"
                },
                {
                 "type": "string"
                }
               ],
               "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
               "x-kubernetes-int-or-string": true
              },
              "name": {
               "type": "string"
              },
              "nominalQuota": {
               "anyOf": [
                {
                 "type": "integer"
                },
                {
                 "type": "string"
                }
               ],
               "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
               "x-kubernetes-int-or-string": true
              }
             },
             "required": [
              "name",
              "nominalQuota"
             ],
             "type": "object"
            },
            "maxItems": 64,
            "minItems": 1,
            "type": "array",
            "x-kubernetes-list-map-keys": [
             "name"
            ],
            "x-kubernetes-list-type": "map"
           }
          },
          "required": [
           "name",
           "resources"
          ],
          "type": "object"
         },
         "maxItems": 64,
         "minItems": 1,
         "type": "array",
         "x-kubernetes-list-map-keys": [
          "name"
         ],
         "x-kubernetes-list-type": "map"
        }
       },
       "required": [
        "coveredResources",
        "flavors"
       ],
       "type": "object",
       "x-kubernetes-validations": [
        {
         "message": "flavors must have the same number of resources as the coveredResources",
         "rule": "self.flavors.all(x, size(x.resources) == size(self.coveredResources))"
        }
       ]
      },
      "maxItems": 16,
      "type": "array",
      "x-kubernetes-list-type": "atomic"
     },
     "stopPolicy": {
      "default": "None",
      "enum": [
       "None",
       "Hold",
       "HoldAndDrain"
      ],
      "type": "string"
     }
    },
    "type": "object",
    "x-kubernetes-validations": [
     {
      "message": "borrowingLimit must be nil when cohort is empty",
      "rule": "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true"
     }
    ]
   }
  },
  "type": "object"
 },
 "LocalQueue": {
  "properties": {
   "apiVersion": {
    "type": "string"
   },
   "kind": {
    "type": "string"
   },
   "metadata": {
    "type": "object"
   },
   "spec": {
    "properties": {
     "clusterQueue": {
      "maxLength": 253,
      "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
      "type": "string",
      "x-kubernetes-validations": [
       {
        "message": "field is immutable",
        "rule": "self == oldSelf"
       }
      ]
     },
     "fairSharing": {
      "properties": {
       "weight": {
        "anyOf": [
         {
          "type": "integer"
         },
         {
          "type": "string"
         }
        ],
        "default": 1,
        "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
        "x-kubernetes-int-or-string": true
       }
      },
      "type": "object"
     },
     "stopPolicy": {
      "default": "None",
      "enum": [
       "None",
       "Hold",
       "HoldAndDrain"
      ],
      "type": "string"
     }
    },
    "type": "object"
   }
  },
  "type": "object"
 },
 "ResourceFlavor": {
  "properties": {
   "apiVersion": {
    "type": "string"
   },
   "kind": {
    "type": "string"
   },
   "metadata": {
    "type": "object"
   },
   "spec": {
    "properties": {
     "nodeLabels": {
      "additionalProperties": {
       "type": "string"
      },
      "maxProperties": 8,
      "type": "object",
      "x-kubernetes-map-type": "atomic"
     },
     "nodeTaints": {
      "items": {
       "properties": {
        "effect": {
         "type": "string"
        },
        "key": {
         "type": "string"
        },
        "timeAdded": {
         "format": "date-time",
         "type": "string"
        },
        "value": {
         "type": "string"
        }
       },
       "required": [
        "effect",
        "key"
       ],
       "type": "object"
      },
      "maxItems": 8,
      "type": "array",
      "x-kubernetes-list-type": "atomic",
      "x-kubernetes-validations": [
       {
        "message": "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        "rule": "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
       }
      ]
     },
     "tolerations": {
      "items": {
       "properties": {
        "effect": {
         "type": "string"
        },
        "key": {
         "type": "string"
        },
        "operator": {
         "type": "string"
        },
        "tolerationSeconds": {
         "format": "int64",
         "type": "integer"
        },
        "value": {
         "type": "string"
        }
       },
       "type": "object"
      },
      "maxItems": 8,
      "type": "array",
      "x-kubernetes-list-type": "atomic",
      "x-kubernetes-validations": [
       {
        "message": "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
        "rule": "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)"
       },
       {
        "message": "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        "rule": "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)"
       },
       {
        "message": "supported toleration values: 'Equal'(default), 'Exists'",
        "rule": "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])"
       },
       {
        "message": "a value must be empty when 'operator' is 'Exists'",
        "rule": "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)"
       },
       {
        "message": "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        "rule": "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
       }
      ]
     },
     "topologyName": {
      "maxLength": 253,
      "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
      "type": "string"
     }
    },
    "type": "object",
    "x-kubernetes-validations": [
     {
      "message": "at least one nodeLabel is required when topology is set",
      "rule": "!has(self.topologyName) || self.nodeLabels.size() >= 1"
     },
     {
      "message": "topologyName is immutable when topologyName is set",
      "rule": "!has(oldSelf.topologyName) || (has(self.topologyName) && self.topologyName == oldSelf.topologyName)"
     }
    ]
   }
  },
  "type": "object"
 }
}
""")
